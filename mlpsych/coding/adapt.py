"""``mlpsych adapt``: fine-tune a SQuAD2 reader on a study's coded answers into a reader folder any run can use.

Papers are far longer than a reader's window, so the coding becomes SQuAD2 records over passages (runs of whole
sentences, about ``passage_words`` long):

- every positive span gives a record whose passage holds it; for entity questions other occurrences of the same
  text in the paper are positives too (gold marks one mention of "random forest", the paper names it ten times),
- passages holding an answer a coder marked wrong, and no positive, are unanswerable records (hard negatives),
- other passages of a coded (paper, question), without any positive's text, are unanswerable records, a stable
  draw of ``negatives`` per positive (all of them would drown the answers: most of a paper answers nothing),
- a bridged question (q4, "What was __PLACEHOLDER__ used for?") trains on its sub-questions: a sheet row names its
  bridge entity; a gold answer takes the coded bridge answer (q1) mentioned nearest to it.

Training is ``mlpsych dev train-reader``'s loop (:func:`mlpsych.dev.train_reader.fit`: checkpoints that resume,
safetensors, progress bar with an ETA), optionally with general SQuAD 2.0 records replayed against forgetting. The
folder is written beside its destination and renamed into place, so it is never half written; its
``mlpsych_reader.json`` records the base reader, the papers and questions it learnt from and the counts. Then a
calibrator for the reader's answers, cross-fitted on the coded papers (:mod:`mlpsych.coding.crossfit`), is added
to the folder (it says what it was fitted on).
"""

from __future__ import annotations

import glob
import logging
import os
import re
import shutil
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from mlpsych.files import remove_leftovers
from mlpsych.coding.coded import Coding, CodedSpan
from mlpsych.coding.crossfit import CALIBRATOR_FILE, CrossFitted, cross_fitted_calibrator
from mlpsych.dev.train_reader import (
    check_reader_out,
    META_FILE,
    SquadExample,
    TrainSettings,
    cache_root,
    fit,
    load_examples,
    predict,
    save_reader,
    squad2_report,
)
from mlpsych.documents import Document, sentence_spans
from mlpsych.errors import UserError
from mlpsych.questions import QuestionSet, QuestionTemplate
from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)

ADAPTED_KEY = "adapted"  # the section of mlpsych_reader.json describing an adapted reader
# A question is answered by the adapted reader once the coding gave it this many answers (one batch of positives);
# with fewer it keeps its base reader. Set after q3, coded 5 and 9 times in the 17-paper folds, read a little worse
# adapted (benchmarks/README.md, adapt); not validated on other papers.
MIN_ANSWERS = 16


class AdaptError(UserError):
    """Coding that cannot train a reader (nothing coded, questions unknown): the message says what to do."""


@dataclass
class AdaptOptions:
    """What records are made from the coding (the weights' settings are the ``TrainSettings``)."""

    passage_words: int = 150
    negatives: float = 1.0  # unanswerable passages drawn per positive record, per (paper, question)
    max_repeats: int = 3  # further occurrences of an entity answer's text used as positives
    replay: Path | None = None  # SQuAD 2.0 JSON replayed against forgetting
    replay_share: float = 0.5  # replayed records per coded record
    heldout_papers: int = 0  # the last coded papers, scored (passage level) and not trained on
    min_answers: int = MIN_ANSWERS  # coded answers a question needs for runs to use the adapted reader for it
    # folds of coded papers the calibrator is cross-fitted on (0: no calibrator). 3 over 2: lower calibration error
    # on 17 coded papers at < 2x the cost, by a rule fixed before the run (benchmarks/README.md, adapt)
    calibration_folds: int = 3
    seed: int = 0


@dataclass
class Records:
    """Training records and what they hold, per question (the counts go into ``mlpsych_reader.json``)."""

    examples: list[SquadExample] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, question: str, kind: str, n: int = 1) -> None:
        by_kind = self.counts.setdefault(question, {"positive": 0, "repeat": 0, "hard_negative": 0, "negative": 0})
        by_kind[kind] += n


def passages(text: str, words: int) -> list[tuple[int, int]]:
    """Runs of whole sentences of about ``words`` words (a longer sentence is a passage alone)."""
    out: list[tuple[int, int]] = []
    start = end = None
    count = 0
    for a, b in sentence_spans(text):
        n = len(text[a:b].split())
        if start is not None and count + n > words:
            out.append((start, end))
            start, count = None, 0
        if start is None:
            start = a
        end, count = b, count + n
    if start is not None:
        out.append((start, end))
    return out


def _around(spans: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """The passage holding ``[start, end)``: the one it starts in, stretched to the sentence it ends in."""
    first = next((p for p in spans if p[0] <= start < p[1]), (start, end))
    last = next((p for p in spans if p[0] < end <= p[1]), first)
    return min(first[0], start), max(last[1], end)


def _draw(key: str, seed: int) -> float:
    """A stable number in [0, 1) per record key: the same records on a rerun (the checkpoints resume)."""
    return zlib.crc32(f"{seed}:{key}".encode()) / 2**32


def _nearest_entity(span: CodedSpan, bridges: list[CodedSpan]) -> str | None:
    """The bridge answer (e.g. a q1 technique) mentioned nearest to a follow-up answer of the same paper."""
    if not bridges:
        return None
    return min(bridges, key=lambda b: abs(b.start - span.start)).text


def _question_text(template: QuestionTemplate, span: CodedSpan, bridges: list[CodedSpan]) -> str | None:
    if not template.bridge_from:
        return template.text
    entity = span.bridge_entity or _nearest_entity(span, bridges)
    return template.sub_question(entity) if entity else None


def build_records(coding: Coding, documents: dict[str, Document], questions: QuestionSet,
                  options: AdaptOptions) -> Records:
    """SQuAD2 records from the coding (the rules of the module docstring), in paper then question order."""
    records = Records()
    by_pair: dict[tuple[str, str], list[CodedSpan]] = defaultdict(list)
    for span in coding.spans:
        by_pair[(span.paper_id, span.question_id)].append(span)
    for paper, question_id in sorted(coding.pairs):
        template = questions.get(question_id)
        doc = documents[paper]
        cut = passages(doc.text, options.passage_words)
        spans = by_pair.get((paper, question_id), [])
        bridges = [s for s in by_pair.get((paper, template.bridge_from), []) if s.correct] if template.bridge_from \
            else []
        positives = [s for s in spans if s.correct]
        taken: set[tuple[int, int]] = set()  # passages holding a positive

        def add(kind: str, span: CodedSpan, start: int, end: int, answer: tuple[int, int] | None) -> None:
            text = _question_text(template, span, bridges)
            if text is None:
                return
            context = doc.text[start:end]
            answers = (doc.text[answer[0]:answer[1]],) if answer else ()
            starts = (answer[0] - start,) if answer else ()
            records.examples.append(SquadExample(
                id=f"{paper}|{question_id}|{kind}|{start}|{answer[0] if answer else ''}", article=paper,
                context=context, question=text, answers=answers, answer_starts=starts))
            records.count(question_id, kind)

        for span in positives:
            where = _around(cut, span.start, span.end)
            taken.add(where)
            add("positive", span, *where, (span.start, span.end))
            if template.kind != "entity":
                continue
            repeats = 0
            for a, b in _occurrences(span.text, doc.text):
                if repeats >= options.max_repeats:
                    break
                if (a, b) == (span.start, span.end) or any(s.start <= a < s.end for s in positives):
                    continue
                where = _around(cut, a, b)
                taken.add(where)
                add("repeat", span, *where, (a, b))
                repeats += 1
        texts = [s.text.casefold() for s in positives]
        free = [p for p in cut if p not in taken and not any(t in doc.text[p[0]:p[1]].casefold() for t in texts)]
        hard = {_around(cut, s.start, s.end) for s in spans if not s.correct}
        sample = (positives or bridges or [None])[0]
        for start, end in sorted(hard):
            if (start, end) in taken or any(t in doc.text[start:end].casefold() for t in texts):
                continue
            _add_negative(add, template, spans, sample, start, end, "hard_negative")
        wanted = options.negatives * max(1, len(positives))
        ranked = sorted((p for p in free if p not in hard), key=lambda p: _draw(f"{paper}|{question_id}|{p[0]}",
                                                                                 options.seed))
        for start, end in ranked[: round(wanted)]:
            _add_negative(add, template, spans, sample, start, end, "negative")
    return records


def _add_negative(add, template: QuestionTemplate, spans: list[CodedSpan], sample: CodedSpan | None, start: int,
                  end: int, kind: str) -> None:
    """An unanswerable record; a bridged question asks about an entity of the paper (a wrong answer's or the
    first positive's), as its sub-questions do."""
    wrong = next((s for s in spans if not s.correct and start <= s.start < end), None)
    span = wrong or sample
    if span is None:
        if template.bridge_from:
            return
        span = CodedSpan("", template.id, "", start, start, False, "negative")
    add(kind, span, start, end, None)


def _occurrences(needle: str, text: str) -> list[tuple[int, int]]:
    """Where an entity answer's text recurs (case-insensitive, whole words)."""
    pattern = r"(?<!\w)" + r"\s+".join(re.escape(w) for w in needle.split()) + r"(?!\w)"
    return [(m.start(), m.end()) for m in re.finditer(pattern, text, flags=re.IGNORECASE)] if needle.strip() else []


def replay_records(path: Path, n: int, seed: int) -> list[SquadExample]:
    """``n`` SQuAD 2.0 records, a stable draw (answerable and unanswerable as the file has them)."""
    if n <= 0:
        return []
    examples = load_examples(path)
    return sorted(examples, key=lambda e: _draw(e.id, seed))[:n]


@dataclass
class AdaptResult:
    """What ``adapt`` did: the folder (None when stopped early), the steps, the counts it recorded and its
    answers' calibrator (None when stopped early)."""

    out_dir: Path | None
    checkpoint_dir: Path
    step: int
    steps_total: int
    resumed_from: int
    meta: dict
    calibration: CrossFitted | None = None


def adapt_settings(reader: str, **changes) -> TrainSettings:
    """Training settings for adapting an already trained reader: a lower learning rate than training from an
    encoder, four epochs (a study's coding is a few hundred records: few-shot QA fine-tuning takes many passes),
    windows no longer than the reader's (at most 384 tokens, for CPU time). Fixed before any figure was measured."""
    from mlpsych.models import load_tokenizer

    limit = getattr(load_tokenizer(reader), "model_max_length", 384) or 384
    base = dict(base_model=reader, max_length=int(min(limit, 384)), lr=5e-5, epochs=4.0, batch_size=16,
                heldout_articles=0, calibration_articles=0, unanswerable_fraction=1.0, checkpoint_every=20)
    return TrainSettings(**{**base, **changes})


def adapt(coding: Coding, documents: dict[str, Document], questions: QuestionSet, out_dir: Path,
          settings: TrainSettings, options: AdaptOptions | None = None, *, checkpoints: Path | None = None,
          max_steps: int | None = None, progress: bool = True, source: dict | None = None,
          run_settings: RunSettings | None = None) -> AdaptResult:
    """Adapt ``settings.base_model`` on ``coding`` and write the reader to ``out_dir`` (see the module docstring).

    Raises :class:`AdaptError` when nothing is coded or a coded question is not in ``questions``. ``source``
    (what the coding was read from) goes into ``mlpsych_reader.json``; ``run_settings``: how the runs that will
    use the reader read (the fold readers of its calibrator read so; default: a run's defaults).
    """
    options = options or AdaptOptions()
    out_dir = Path(out_dir)
    if not coding.pairs:
        raise AdaptError("no coded answers: in the results sheet's 'answers' sheet, mark answers in the 'correct' "
                         "column (yes/no), write corrections in 'corrected_answer', or add missed answers in the "
                         "app's review view; then adapt again")
    unknown = sorted({q for _, q in coding.pairs} - {q.id for q in questions.questions})
    if unknown:
        raise AdaptError(f"coded question(s) {', '.join(unknown)} are not in the question file "
                         f"(it has {', '.join(q.id for q in questions.questions)}): give the question file the "
                         "coding was done with (--questions)")
    check_out(out_dir)
    papers = coding.papers
    held = papers[len(papers) - options.heldout_papers:] if options.heldout_papers else []
    if held and len(held) >= len(papers):
        raise AdaptError(f"{len(papers)} coded paper(s): too few to hold {options.heldout_papers} out")
    trained = coding.only([p for p in papers if p not in held])
    records = build_records(trained, documents, questions, options)
    if not any(e.answerable for e in records.examples):
        raise AdaptError("the coding holds no answer that was found in the papers (every coded answer was marked "
                         "wrong or skipped): mark or add some correct answers first")
    replay = _replay(options, len(records.examples))
    checkpoints = checkpoints or cache_root() / "adapted" / out_dir.name / "checkpoints"
    log.info("adapting %s on %d papers: %d records (%d with an answer) + %d replayed", settings.base_model,
             len(trained.papers), len(records.examples), sum(e.answerable for e in records.examples), len(replay))
    fitted = fit(records.examples + replay, settings, checkpoints, max_steps=max_steps, progress=progress,
                 desc="adapting")
    meta = {ADAPTED_KEY: {
        "base_reader": settings.base_model,
        "source": source or {},
        "papers": trained.papers,
        "questions": {q: {"text": questions.get(q).text, **records.counts.get(q, {})} for q in trained.questions},
        "records": len(records.examples),
        "replay": {"file": str(options.replay) if options.replay else None, "records": len(replay)},
        "skipped": coding.skipped,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(options).items()},
    }, "steps": fitted.steps_total, "train_features": fitted.features, "fingerprint": fitted.fingerprint}
    if not fitted.finished:
        return AdaptResult(None, fitted.checkpoint_dir, fitted.step, fitted.steps_total, fitted.resumed_from, meta)
    heldout = None
    if held:
        test = build_records(coding.only(held), documents, questions, options).examples
        heldout = {"papers": held, **squad2_report(test, predict(fitted.model, fitted.tokenizer, test, settings,
                                                                   desc="held out"))}
    meta["heldout"] = heldout
    _write_atomically(out_dir, fitted, settings, meta)
    result = AdaptResult(out_dir, fitted.checkpoint_dir, fitted.step, fitted.steps_total, fitted.resumed_from, meta)
    del fitted  # the fold readers train next: one model in memory at a time
    # The reader is usable from here; its calibrator follows (runs use the default calibrator until it is there).
    log.info("reader written to %s; cross-fitting its calibrator", out_dir)
    result.calibration = _calibrate(trained, documents, questions, settings, options, run_settings or RunSettings(),
                                    checkpoints / "calibration", progress)
    if result.calibration.calibrator is not None and not _holds(out_dir, meta["fingerprint"]):
        result.calibration = CrossFitted(None, f"another adapt wrote its reader to {out_dir} while this one's "
                                               "calibrator was fitted, and it is not that reader's: rerun to write both")
    if result.calibration.calibrator is not None:
        result.calibration.calibrator.save(out_dir / CALIBRATOR_FILE)
    return result


def _holds(out_dir: Path, fingerprint: str) -> bool:
    """Whether ``out_dir`` still holds the reader trained on the records and settings of ``fingerprint``: two
    adapts of one --out at once (two coders' sheets) each saved their calibrator into whichever reader was there
    last, and a reader was left with the other one's calibrator, without a word."""
    import json

    try:
        return json.loads((out_dir / META_FILE).read_text(encoding="utf-8")).get("fingerprint") == fingerprint
    except (OSError, ValueError, AttributeError):
        return False


def _replay(options: AdaptOptions, coded_records: int) -> list[SquadExample]:
    return replay_records(options.replay, round(options.replay_share * coded_records), options.seed) \
        if options.replay else []


def _calibrate(coding: Coding, documents: dict[str, Document], questions: QuestionSet, settings: TrainSettings,
               options: AdaptOptions, run_settings: RunSettings, workdir: Path, progress: bool) -> CrossFitted:
    """The reader's calibrator, cross-fitted on ``coding`` by fold readers trained as this reader was."""

    def train_fold(part: Coding, folder: Path, description: str) -> Path | None:
        examples = build_records(part, documents, questions, options).examples
        if not any(e.answerable for e in examples):
            return None
        examples += _replay(options, len(examples))
        # kept per training records and settings: a rerun on other coding does not reuse a stale fold reader
        reader = folder / settings.fingerprint(examples) / "reader"
        if (reader / META_FILE).is_file():  # written last: the fold reader is complete
            return reader
        fold = fit(examples, settings, folder / "checkpoints", progress=progress, desc=description)
        save_reader(reader, fold.model, fold.tokenizer, settings, {"calibration_fold_of": part.papers})
        return reader

    return cross_fitted_calibrator(coding, documents, questions, options.calibration_folds, run_settings, workdir,
                                   train_fold, progress)


def check_out(out_dir: Path) -> None:
    """Before training: ``out_dir`` can become the reader folder (:func:`check_reader_out`), and is not a folder of
    other files, which the adapted reader replaces whole."""
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / META_FILE).is_file():
        raise AdaptError(f"{out_dir} exists and is not a reader folder: give a new folder (or an earlier adapted "
                         "reader's, which is replaced)")
    check_reader_out(out_dir)


def _write_atomically(out_dir: Path, fitted, settings: TrainSettings, meta: dict) -> None:
    """Write the folder beside ``out_dir`` and rename it into place (an earlier reader there is replaced only
    once the new one is complete), so a crash never leaves a half-written reader; what a killed adapt left beside it
    goes as :func:`mlpsych.files.remove_leftovers` rules. A write that fails (a full disk) is one line: the training
    is in its checkpoints, and the rerun writes it without training again."""
    work = f".{out_dir.name}."
    remove_leftovers(p for kind in ("partial", "old") for p in out_dir.parent.glob(f"{glob.escape(work)}{kind}-*"))
    partial = out_dir.with_name(f"{work}partial-{os.getpid()}")
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(partial, ignore_errors=True)
        save_reader(partial, fitted.model, fitted.tokenizer, settings, meta)
        old = out_dir.with_name(f"{work}old-{os.getpid()}")
        if out_dir.exists():
            os.replace(out_dir, old)
        os.replace(partial, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as error:
        raise AdaptError(f"--out {out_dir} cannot be written ({error.strerror or error}); the training is kept in "
                         f"its checkpoints: rerun the same command once it can be written, and it is not trained "
                         "again") from None
    finally:  # an interrupted or failed write leaves no half-written folder (after the rename there is none)
        shutil.rmtree(partial, ignore_errors=True)


def adapted_meta(reader_dir: str | Path) -> dict | None:
    """The ``adapted`` section of a reader folder's ``mlpsych_reader.json``, or None when it is not an adapted
    reader (a Hub id, a plain reader folder, an unreadable file)."""
    import json

    meta_path = Path(reader_dir) / META_FILE
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else None
    except (OSError, ValueError):
        return None
    section = meta.get(ADAPTED_KEY) if isinstance(meta, dict) else None
    if not isinstance(section, dict) or not isinstance(section.get("questions"), dict):
        return None
    if not _well_formed(section):
        log.warning("%s: its '%s' section is not as `mlpsych adapt` writes it; the folder is read as a plain reader",
                    meta_path, ADAPTED_KEY)
        return None
    return {**section, "written": meta.get("written")}


def _well_formed(section: dict) -> bool:
    """Whether what runs read of an ``adapted`` section has the types `mlpsych adapt` writes: a reader folder is
    shared, and a hand-edited file ("q1": 5 for its counts) stopped the run after every paper was read, as a bug."""
    options, source = section.get("options") or {}, section.get("source") or {}
    coded = source.get("coded") or [] if isinstance(source, dict) else None
    return (all(isinstance(c, dict) and isinstance(c.get("positive", 0), int) for c in section["questions"].values())
            and isinstance(options, dict) and isinstance(options.get("min_answers", MIN_ANSWERS), int)
            and isinstance(section.get("papers", []), list)
            and isinstance(coded, list) and all(isinstance(c, str) for c in coded))


def adapted_questions(reader_dir: str | Path) -> list[str] | None:
    """The question ids a reader folder answers in runs (those it learnt enough coded answers of), or None when it
    is not an adapted reader."""
    section = adapted_meta(reader_dir)
    return None if section is None else answered_questions(section)


def min_answers_of(section: dict) -> int:
    """The coded answers per question an ``adapted`` section was written with (the default for older folders)."""
    return (section.get("options") or {}).get("min_answers", MIN_ANSWERS)


def answered_questions(section: dict) -> list[str]:
    """The questions of an ``adapted`` section with at least its ``min_answers`` coded answers (positives)."""
    minimum = min_answers_of(section)
    return sorted(q for q, counts in section["questions"].items() if counts.get("positive", 0) >= minimum)


def describe_adapted(reader_dir: str | Path) -> str | None:
    """One line for the run sheet: what an adapted reader learnt from (None for any other model)."""
    section = adapted_meta(reader_dir)
    if section is None:
        return None
    source = section.get("source") or {}
    coding = source.get("gold") or ", ".join(source.get("coded") or []) or "?"
    return (f"adapted from {section.get('base_reader')} on {len(section.get('papers', []))} coded papers "
            f"({coding}) for {', '.join(adapted_questions(reader_dir)) or 'no question'}, written "
            f"{section.get('written')}")


def use_adapted(questions: QuestionSet, readers: Sequence[str | Path]) -> QuestionSet:
    """The questions with each adapted reader as the only model of every question it was adapted on (a later
    reader wins a question two were adapted on). Raises AdaptError for a folder that is not an adapted reader or
    was adapted on none of these questions."""
    models: dict[str, str] = {}
    for reader in readers:
        if not Path(reader).is_dir():  # a typo or a reader left on another machine: said as such
            raise AdaptError(f"--adapted {reader}: no such folder (the folder `mlpsych adapt --out` wrote)")
        section = adapted_meta(reader)
        if section is None:
            raise AdaptError(f"--adapted {reader}: not a reader folder written by `mlpsych adapt` (no "
                             f"'{ADAPTED_KEY}' section in its {META_FILE})")
        adapted = answered_questions(section)
        if not adapted:
            raise AdaptError(f"--adapted {reader}: no question had the {min_answers_of(section)} coded "
                             "answers it needs to be answered by this reader (" + ", ".join(
                                 f"{q}: {c.get('positive', 0)}" for q, c in sorted(section["questions"].items()))
                             + "): code more answers and adapt again")
        mine = [q for q in adapted if q in {t.id for t in questions.questions}]
        if not mine:
            raise AdaptError(f"--adapted {reader}: adapted on {', '.join(adapted)}, none of which this run asks")
        _refuse_other_questions(reader, section["questions"], questions, mine)
        models.update({q: str(reader) for q in mine})
    return questions.model_copy(update={"questions": [
        q.model_copy(update={"models": [models[q.id]]}) if q.id in models else q for q in questions.questions]})


def _refuse_other_questions(reader: str | Path, learnt: dict, questions: QuestionSet, ids: Sequence[str]) -> None:
    """Question ids are a file's own ("q1" is sample size in one study's file, techniques in mlpsych's): a reader
    adapted on another file's q1 answered this run's q1 without a word. The texts it learnt must be the run's
    (spacing and case aside); a folder that recorded none is not checked."""
    for q in ids:
        text, asked = learnt[q].get("text"), questions.get(q).text
        if isinstance(text, str) and " ".join(text.split()).casefold() != " ".join(asked.split()).casefold():
            raise AdaptError(f"--adapted {reader}: adapted on another question {q} ({text!r}) than this run's "
                             f"({asked!r}): give the question file it was adapted with (--questions)")


def summary_lines(result: AdaptResult) -> Sequence[str]:
    """What the command prints: the counts per question, what was skipped and why, where the reader is."""
    section = result.meta[ADAPTED_KEY]
    lines = [f"{len(section['papers'])} coded papers, {section['records']} records "
             f"(+{section['replay']['records']} replayed SQuAD)"]
    answers_for = answered_questions(section)
    for q, counts in section["questions"].items():
        lines.append(f"  {q}: {counts.get('positive', 0)} answers (+{counts.get('repeat', 0)} repeats), "
                     f"{counts.get('hard_negative', 0)} marked-wrong passages, {counts.get('negative', 0)} "
                     "passages without an answer" + ("" if q in answers_for else
                                                     "; too few answers: runs keep the base reader for it"))
    lines.append(f"runs with --adapted use this reader for {', '.join(answers_for) or 'no question yet'} (a question "
                 f"needs {min_answers_of(section)} coded answers; code more to add the others)")
    for line in section["skipped"]:
        lines.append(f"  skipped: {line}")
    calibration = result.calibration
    if calibration is not None and calibration.calibrator is None:
        lines.append(f"no calibrator for its answers: {calibration.reason} (runs use the default or --calibrator)")
    elif calibration is not None:
        fitted_on = calibration.calibrator.fitted_on
        lines.append(f"its answers' calibrator ({result.out_dir / CALIBRATOR_FILE}): fitted on {fitted_on['answers']} "
                     f"answers of the coded papers ({fitted_on['correct']} correct) read by readers adapted on the "
                     "other papers")
    heldout = result.meta.get("heldout")
    if heldout:
        lines.append(f"held out {len(heldout['papers'])} papers (passages): answerable F1 "
                     f"{heldout['answerable_f1']:.3f}, overall F1 {heldout['overall_f1_plain']:.3f}")
    return lines
