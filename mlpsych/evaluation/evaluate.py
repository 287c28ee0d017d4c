"""Dataset-level evaluation of an ``mlpsych run`` output against MLPsych-format gold, in the paper's table shape.

Which papers are scored, as the paper's released evaluation does. Conventions of the MLPsych dataset (see its
README): the evaluated papers are the keys of the gold ``q1``; a paper absent from an *unanswerable* question
(``q2``) has an empty gold list; a paper absent from any other question was not annotated for it and is left
out of that question.

- With the corpus's texts (``texts``, the ``text.json``), every paper of the corpus that the gold covers for a
  question is a row of that question. A paper with gold answers and no prediction scores 0 (F1, EM, Mentions,
  Similar Match). A paper missing from the run's output altogether is an error (:class:`EvalInputError` naming
  it), unless the run's papers sheet (``papers``, an XLSX export's status column) says the paper failed: it is
  then a row scoring 0 on every metric, and the table notes how many papers failed.
- Without the texts, the papers are those of the gold that the prediction file mentions (an answer row or a
  papers-sheet row); the others are left out with a warning, so a run on part of the corpus scores that part.
- Empty gold: EM, Mentions and Similar Match are 1 when nothing is predicted and 0 otherwise; F1 is undefined
  for that paper and left out of the F1 mean (see :mod:`mlpsych.evaluation.metrics`).

Rows of the table are the reader models and ``combined``. An extractive answer belongs to its model, or to
``combined`` when it is an ensemble row (``ensemble: true`` or more than one model). A normalized answer
belongs to every model whose LLM output held it, and to ``combined`` when the question had several readers.
``ungrounded`` answers are never scored, nor a coder's (stage ``coder``, or left blank in a sheet with a
``stage`` column: a row typed in by hand, :func:`mlpsych.marks.row_stage`). All sub-question answers of a multi-hop question count as that
paper's prediction list. Confidence intervals resample papers (paired across models) with replacement; the
papers whose F1 is undefined are skipped in each resample's F1 mean.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from mlpsych.errors import EvalInputError
from mlpsych.evaluation.sheets import CSV_SHEET, CSV_SUFFIXES, WORKBOOK_SUFFIXES, is_csv, read_csv_rows
from mlpsych.evaluation.metrics import (
    COLUMNS,
    DEFAULT_SIMILARITY_THRESHOLD,
    ItemScore,
    SimilarityFn,
    aggregate,
    clean_answers,
    score_item,
)
from mlpsych.evaluation.similarity import EmbeddingSimilarity
from mlpsych.marks import row_stage

logger = logging.getLogger(__name__)

COMBINED = "combined"
STAGES = ("extractive", "normalized", "best")
DEFAULT_STAGE = "best"
DEFAULT_UNANSWERABLE = ("q2",)  # MLPsych's gold leaves a paper out of q2 when it names no software


# ----------------------------------------------------------------------------------------------------------
# Reading inputs
# ----------------------------------------------------------------------------------------------------------


def load_texts(path: str | Path) -> dict[str, str]:
    """MLPsych ``text.json``: a JSON string holding JSON ``{paper_id: text}`` (a plain object is accepted too)."""
    from mlpsych.errors import IngestError
    from mlpsych.ingest.formats import read_text_json

    path = Path(path)
    if not path.is_file():
        raise EvalInputError(f"{path}: no such file")
    try:
        return read_text_json(path)
    except IngestError as error:
        raise EvalInputError(f"{path}: {error}") from None


def load_gold(path: str | Path) -> dict[str, dict[str, list[str]]]:
    """MLPsych gold ``{question: {paper_id: [{start, end, text}, ...]}}`` as ``{question: {paper: [text]}}``."""
    return gold_from_dict(read_gold_json(path), str(path))


def gold_from_dict(data: Any, source: str = "gold") -> dict[str, dict[str, list[str]]]:
    """Gold answers from the decoded JSON object (spans as dicts with ``text``, or plain strings).

    Paper ids and answers pass the ingest text normalization, as the papers' texts and ids did: gold typed as
    "𝐾" matches the "K" read from the paper, and an id with an odd character names the same paper on both sides.
    """
    from mlpsych.ingest.textnorm import normalize_text

    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise EvalInputError(f"{source}: expected {{question_id: {{paper_id: [spans]}}}}")
    gold: dict[str, dict[str, list[str]]] = {}
    for question, papers in data.items():
        gold[question] = {}
        for paper, spans in papers.items():
            texts = gold_texts(spans, f"{source}: {question} {paper}")
            gold[question][normalize_text(str(paper))] = [normalize_text(t) for t in texts]
    return gold


def gold_texts(spans: Any, where: str) -> list[str]:
    """A paper's gold list as its answer texts (a span is ``{"text": ...}`` or the text itself). A hand-written
    gold file's slip (one string for the list, a span without ``text``) is an error naming the question and paper:
    a string read as a list would be scored one character at a time."""
    if spans is None:
        return []
    if not isinstance(spans, list):
        raise EvalInputError(f"{where}: expected a list of answers ([{{\"text\": ...}}] or [\"...\"]), "
                             f"not {type(spans).__name__} {str(spans)[:60]!r}")
    missing = [s for s in spans if isinstance(s, dict) and "text" not in s]
    if missing:
        raise EvalInputError(f"{where}: an answer without \"text\": {str(missing[0])[:80]}")
    texts = (s["text"] if isinstance(s, dict) else s for s in spans)
    return [str(t) for t in texts if t is not None]


def read_gold_json(path: str | Path) -> Any:
    """The decoded JSON of a gold file (``eval``, ``calibrate`` and ``adapt`` ``--gold``); a file that is not JSON
    text, such as the coded .xlsx given as gold, is one line, not a UnicodeDecodeError taken for a bug."""
    path = Path(path)
    if not path.is_file():
        raise EvalInputError(f"{path}: no such file")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise EvalInputError(f"{path}: not JSON text (a spreadsheet?): gold is a JSON file "
                             "{question_id: {paper_id: [spans]}}; a coded results sheet is read by --coded "
                             "(calibrate, adapt) and mlpsych agree") from None
    except json.JSONDecodeError as error:
        raise EvalInputError(f"{path}: not valid JSON ({error})") from error


def truthy(value: Any) -> bool:
    """Lenient boolean of a spreadsheet or JSON cell (True, 1, "yes", "true", "y")."""
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "y", "t"}
    return bool(value)


def parse_models(value: Any) -> list[str]:
    """``models`` as a list: JSONL gives a list, XLSX a "+"-joined string (a JSON list string also works)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if str(v).strip()]
    text = str(value).strip()
    if text.startswith("["):
        try:
            return [str(v) for v in json.loads(text)]
        except json.JSONDecodeError:
            pass
    return [part.strip() for part in text.split("+") if part.strip()]


def load_predictions(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an ``mlpsych run`` export: JSONL (one answer per line), XLSX ("answers" + "model_answers") or CSV
    (the final answers)."""
    path = Path(path)
    if not path.is_file():
        raise EvalInputError(f"{path}: no such file")
    if path.suffix.lower() in WORKBOOK_SUFFIXES + CSV_SUFFIXES:
        # "answers" holds the paper's final answers, "model_answers" (when written) every model's other rows
        rows = read_sheet(path, "answers") + read_sheet(path, "model_answers", required=False)
    elif path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        rows = _read_jsonl(path)
    else:
        raise EvalInputError(f"{path}: predictions must be .jsonl, .xlsx or .csv")
    missing = {"paper_id", "question_id", "answer"} - set().union(*(r.keys() for r in rows)) if rows else set()
    if missing:
        raise EvalInputError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    return rows


def load_run_papers(path: str | Path) -> list[dict[str, Any]] | None:
    """The run's papers and their status: the ``papers`` sheet of an XLSX export (``paper_id``, ``source_file``,
    ``status``: "ok" or what went wrong), or None where the output records no papers (JSONL, a sheet-less XLSX)."""
    path = Path(path)
    if path.suffix.lower() not in WORKBOOK_SUFFIXES:
        return None
    return read_sheet(path, "papers", required=False) or None


def failed_status(status: Any) -> bool:
    """A papers-sheet status saying the paper failed (anything but "ok" or blank)."""
    return str(status or "").strip().lower() not in ("", "ok")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                if _one_json_document(path):
                    raise EvalInputError(f"{path}: one JSON document, not the answers of `mlpsych run` (its .jsonl, "
                                         "one answer a line, or its .xlsx); gold goes to --gold") from None
                raise EvalInputError(f"{path}:{number}: not valid JSON ({error.msg})") from error
            if not isinstance(row, dict):
                raise EvalInputError(f"{path}:{number}: expected a JSON object per line")
            rows.append(row)
    return rows


def _one_json_document(path: Path) -> bool:
    """Whether the whole file is one (indented) JSON value: gold given as --pred was said to be "not valid JSON"."""
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return True


def read_sheet(path: str | Path | bytes, sheet: str, required: bool = True) -> list[dict[str, Any]]:
    """Rows of one worksheet as dicts keyed by the lower-cased header of row 1 (blank rows skipped). ``path`` may
    also be a workbook's bytes (a run's spreadsheet held in memory for a download), or a run's CSV (its answers).
    The ``answers`` sheet of a workbook file comes with the review's changes kept beside it and not yet written
    into it (:mod:`mlpsych.journal`)."""
    rows = _sheet_rows(path, sheet, required)
    if sheet == "answers" and not isinstance(path, bytes) and not is_csv(path):
        from mlpsych.journal import Journal, apply_to_rows

        rows = apply_to_rows(rows, Journal(path).pending(rows))
    return rows


def _sheet_rows(path: str | Path | bytes, sheet: str, required: bool) -> list[dict[str, Any]]:
    """The sheet's rows, read alone (:mod:`mlpsych.workbook`): openpyxl's reader took 12-29 s for a 1,000-paper
    study's answers sheet."""
    from mlpsych.workbook import read_values, sheet_names

    in_memory = isinstance(path, bytes)
    name = "the workbook" if in_memory else path
    if not in_memory and not Path(path).is_file():
        raise EvalInputError(f"{path}: no such file")
    if is_csv(path):
        return _csv_sheet(Path(path), sheet, required)
    try:
        table = read_values(path, sheet)
        found = sheet_names(path) if table is None else []
    except Exception as error:  # openpyxl raises several types for a file that is not a workbook
        raise EvalInputError(f"{name}: cannot open as a workbook ({error})") from error
    if table is None:
        if not required:
            return []
        raise EvalInputError(f"{name}: no sheet named {sheet!r} (found: {', '.join(found)})")
    if not table:
        return []
    names = [str(h).strip().lower() if h is not None else "" for h in table[0]]
    _refuse_twice_named(names, name, sheet)
    rows = []
    for number, cells in enumerate(table[1:], 2):
        if all(c is None or str(c).strip() == "" for c in cells):
            continue
        row = {column: cells[i] if i < len(cells) else None for i, column in enumerate(names) if column}
        row["_row"] = number
        rows.append(row)
    return rows


def _csv_sheet(path: Path, sheet: str, required: bool) -> list[dict[str, Any]]:
    """A run's CSV read as its workbook: the "answers" sheet, and no other."""
    if sheet != CSV_SHEET:
        if not required:
            return []
        raise EvalInputError(f"{path}: a CSV holds only a run's {CSV_SHEET!r}, not {sheet!r}: give the .xlsx "
                             "workbook `mlpsych run` wrote")
    names, rows = read_csv_rows(path)
    _refuse_twice_named(names, path, sheet)
    return rows


def _refuse_twice_named(names: Sequence[str], path: str | Path, sheet: str) -> None:
    """A column name typed twice (a second coder's ``correct`` beside the first's): one would silently replace the
    other, so the sheet is refused, naming the columns."""
    from openpyxl.utils import get_column_letter

    letters: dict[str, list[str]] = defaultdict(list)
    for number, name in enumerate(names, 1):
        if name:
            letters[name].append(get_column_letter(number))
    twice = {name: found for name, found in letters.items() if len(found) > 1}
    if twice:
        where = "; ".join(f"{name!r} in columns {' and '.join(found)}" for name, found in twice.items())
        raise EvalInputError(f"{path}: sheet {sheet!r} has two columns named alike ({where}): rename one (a second "
                             "coder's marks go in correct_2)")


# ----------------------------------------------------------------------------------------------------------
# From rows to prediction lists
# ----------------------------------------------------------------------------------------------------------


def group_of(row: dict[str, Any]) -> str:
    """Table row of an answer: ``combined`` for ensemble answers, else its single model."""
    models = parse_models(row.get("models"))
    if truthy(row.get("ensemble")) or len(models) > 1:
        return COMBINED
    return models[0] if models else "unknown"


def question_of(question_id: str, questions: Iterable[str]) -> str | None:
    """Map a row's question id to a gold question; sub-question ids like ``q4:forest`` map to ``q4``."""
    if question_id in questions:
        return question_id
    for question in questions:
        if re.match(re.escape(question) + r"[^0-9A-Za-z]", question_id):
            return question
    return None


def _paper_of(row: dict[str, Any], known: set[str] | None) -> str:
    paper = str(row.get("paper_id") or "").strip()
    if known is None or paper in known:
        return paper
    for candidate in (row.get("source_file"), paper):
        if candidate:
            stem = Path(str(candidate)).stem
            if stem in known:
                return stem
    return paper


@dataclass
class PredictionSet:
    """``lists[(group, question, stage)][paper] = [answer, ...]`` plus the papers the file mentions."""

    lists: dict[tuple[str, str, str], dict[str, list[str]]] = field(default_factory=dict)
    papers: set[str] = field(default_factory=set)
    groups: list[str] = field(default_factory=list)

    def answers(self, group: str, question: str, paper: str, stage: str) -> tuple[list[str], str]:
        """A table row's prediction list for one paper and the stage it came from.

        ``best`` takes the normalized answers where this row has some for the paper, else the extractive ones:
        the pipeline keeps the extractive answers as the paper's answer when normalization grounds nothing.
        """
        def get(s: str) -> list[str] | None:
            return self.lists.get((group, question, s), {}).get(paper)

        if stage == "best":
            normalized, extractive = get("normalized"), get("extractive")
            if normalized:
                return normalized, "normalized"
            return extractive or [], "extractive" if extractive else ""
        found = get(stage)
        return found or [], stage if found else ""

    def has(self, group: str, question: str, stage: str) -> bool:
        stages = ("extractive", "normalized") if stage == "best" else (stage,)
        return any((group, question, s) in self.lists for s in stages)


def row_groups(row: dict[str, Any], stage: str, multi_model: bool) -> list[str]:
    """Table rows an answer belongs to.

    Extractive answers belong to their single model, or to ``combined`` when they are ensemble rows. A
    normalized answer lists the models whose (normalized) output held it, so it belongs to each of them and,
    when the question was read by several models, to ``combined`` as well: the union is the paper's answer.
    """
    if stage == "extractive":
        return [group_of(row)]
    models = parse_models(row.get("models"))
    groups = list(models)
    if multi_model or truthy(row.get("ensemble")) or len(models) > 1:
        groups.append(COMBINED)
    return groups or ["unknown"]


def collect_predictions(
    rows: Sequence[dict[str, Any]], questions: Iterable[str], known_papers: set[str] | None = None
) -> PredictionSet:
    """Bucket export rows by table row, question and stage; ungrounded answers are never scored."""
    questions = list(questions)
    result = PredictionSet()
    unknown_questions: set[str] = set()
    prepared = []
    models_of: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        paper = _paper_of(row, known_papers)
        if not paper:
            continue
        result.papers.add(paper)
        question = question_of(str(row.get("question_id") or "").strip(), questions)
        if question is None:
            unknown_questions.add(str(row.get("question_id")))
            continue
        models_of[question].update(parse_models(row.get("models")))
        stage = row_stage(row) or "extractive"  # blank in a sheet with the column: a coder's row, not scored
        if stage in ("extractive", "normalized"):
            prepared.append((row, paper, question, stage))
    for row, paper, question, stage in prepared:
        answer = row.get("answer")
        for group in row_groups(row, stage, len(models_of[question]) > 1):
            if group not in result.groups:
                result.groups.append(group)
            bucket = result.lists.setdefault((group, question, stage), {}).setdefault(paper, [])
            if answer is not None and str(answer).strip():
                bucket.append(str(answer))
    if unknown_questions:
        logger.info("answers to questions not scored here: %s", ", ".join(sorted(unknown_questions)))
    result.groups.sort(key=lambda g: g == COMBINED)  # single models in order of appearance, the ensemble last
    return result


# ----------------------------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------------------------


@dataclass
class TableRow:
    """One row of a question's table: a model (or ``combined``), the stage scored, numbers and intervals.

    The counts say how the rules of the module docstring applied: ``unanswered`` papers with gold answers this
    row predicted nothing for (scored 0), ``empty_gold`` papers with an empty gold list (F1 left out),
    ``failed`` papers the run failed on (scored 0) and ``left_out`` gold papers the prediction file never
    mentions (without the texts only).
    """

    question: str
    model: str
    stage: str
    metrics: dict[str, float]
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    items: list[ItemScore] = field(default_factory=list, repr=False)
    unanswered: int = 0
    empty_gold: int = 0
    failed: int = 0
    left_out: int = 0


def _natural_key(text: str) -> list[Any]:
    """Sort key putting q2 before q10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def evaluation_papers(gold: dict[str, dict[str, list[str]]], question: str, unanswerable: Iterable[str],
                      anchor: str = "q1") -> list[str]:
    """Papers scored for one question under the dataset's conventions (see the module docstring)."""
    dev = list(gold.get(anchor) or next(iter(gold.values()), {}))
    if question in unanswerable:
        return dev
    return [p for p in dev if p in gold.get(question, {})]


@dataclass
class ScoringPlan:
    """What :func:`evaluate` scores: the bucketed predictions, the questions, and each question's papers."""

    preds: PredictionSet
    questions: list[str]
    papers: dict[str, list[str]]  # question -> papers scored, in gold order
    failed: set[str]  # papers the run failed on (papers sheet) and has no answer for: they score 0
    left_out: dict[str, int]  # question -> gold papers the prediction file never mentions (without the texts)


def plan_scoring(
    gold: dict[str, dict[str, list[str]]],
    rows: Sequence[dict[str, Any]],
    questions: Sequence[str] | None = None,
    texts: dict[str, str] | None = None,
    unanswerable: Iterable[str] = DEFAULT_UNANSWERABLE,
    papers: Sequence[dict[str, Any]] | None = None,
    quiet: bool = False,
) -> ScoringPlan:
    """The papers each question scores (rules in the module docstring); raises :class:`EvalInputError` for a
    question without gold or a paper of the corpus with gold that the run's output does not have.

    Cheap: the command line calls it (``quiet``: no warnings, :func:`evaluate` gives them) before loading an
    embedding model, so a bad input fails at once.
    """
    warn = (lambda *args: None) if quiet else logger.warning
    questions = list(questions or sorted(gold, key=_natural_key))
    unknown = [q for q in questions if q not in gold]
    if unknown:
        raise EvalInputError(f"no gold for question(s) {', '.join(unknown)} (gold has {', '.join(gold)})")
    unanswerable = set(unanswerable)
    known = set(texts) if texts is not None else None
    preds = collect_predictions(rows, questions, known)
    if known is not None:
        strangers = sorted(preds.papers - known)
        if strangers:
            warn("%d predicted paper(s) not in the texts file, e.g. %s", len(strangers), strangers[0])
    status: dict[str, str] = {}
    for paper_row in papers or []:
        paper = _paper_of(paper_row, known)
        if paper:
            status[paper] = str(paper_row.get("status") or "ok").strip() or "ok"
    in_run = preds.papers | set(status)  # an answer row, or a line of the papers sheet
    failed = {p for p in set(status) - preds.papers if failed_status(status[p])}  # failed and no answer at all
    scored: dict[str, list[str]] = {}
    left_out: dict[str, int] = {}
    absent: set[str] = set()
    for question in questions:
        candidates = evaluation_papers(gold, question, unanswerable)
        if known is not None:
            outside = [p for p in candidates if p not in known and p not in in_run]
            if outside:
                warn("%s: %d gold paper(s) are not in the texts file and are left out, e.g. %s",
                     question, len(outside), outside[0])
            scored[question] = [p for p in candidates if p in known or p in in_run]
            absent.update(p for p in scored[question] if p not in in_run)
        else:
            scored[question] = [p for p in candidates if p in in_run]
            left_out[question] = len(candidates) - len(scored[question])
            if left_out[question]:
                warn("%s: %d of %d gold papers are not mentioned in the predictions and are left out",
                     question, left_out[question], len(candidates))
    if not any(scored.values()):
        _refuse_unshared_ids(gold, questions, unanswerable, in_run | (known or set()),
                             "the run's output" if known is None else "the run's output or texts")
    if absent:
        names = sorted(absent, key=_natural_key)
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        raise EvalInputError(
            f"{len(names)} paper(s) of the corpus with gold are missing from the run's output: {shown}. Run them, "
            "or score the run's .xlsx (its papers sheet records the papers that failed, which then score 0), or "
            "leave out the texts (--texts) to score only the papers the output mentions")
    return ScoringPlan(preds, questions, scored, failed, left_out)


def _refuse_unshared_ids(gold: dict[str, dict[str, list[str]]], questions: Sequence[str], unanswerable: set[str],
                         theirs: set[str], where: str) -> None:
    """No gold paper is a paper of ``where``: the ids differ (gold keyed by "smith2020.pdf", the run by file stem),
    and the empty table was said as "no answers to score", though the run has answers."""
    ours = {p for question in questions for p in evaluation_papers(gold, question, unanswerable)}
    if not ours or not theirs:
        return
    raise EvalInputError(
        f"no paper of the gold is in {where}: the gold has {_some(ours)}, {where} has {_some(theirs)}; a paper's id "
        "must be the same in both (its file name without the extension, or its key in text.json)")


def _some(ids: set[str], shown: int = 3) -> str:
    """A few ids, quoted, and how many there are in all."""
    names = sorted(ids, key=_natural_key)
    return ", ".join(map(repr, names[:shown])) + (f" ({len(names)} in all)" if len(names) > shown else "")


def evaluate(
    gold: dict[str, dict[str, list[str]]],
    rows: Sequence[dict[str, Any]],
    questions: Sequence[str] | None = None,
    stage: str = DEFAULT_STAGE,
    similarity: SimilarityFn | None = None,
    threshold: float = DEFAULT_SIMILARITY_THRESHOLD,
    texts: dict[str, str] | None = None,
    unanswerable: Iterable[str] = DEFAULT_UNANSWERABLE,
    bootstrap: int = 0,
    seed: int = 0,
    whole_word_max_len: int = 1,
    papers: Sequence[dict[str, Any]] | None = None,
    progress: bool = False,
) -> list[TableRow]:
    """Score export ``rows`` against ``gold``; one :class:`TableRow` per question and model, ensemble last.

    ``texts`` is the corpus (its keys are the paper ids) and ``papers`` the run's papers sheet (rows with
    ``paper_id``, ``source_file`` and ``status``, see :func:`load_run_papers`); which papers are scored, and how,
    is in the module docstring. A paper of the corpus with gold and no trace in the run's output is an error.
    A ``similarity`` with a ``prepare`` method (:class:`~mlpsych.evaluation.similarity.EmbeddingSimilarity`) is
    handed the answers the items compare before any is scored; ``progress`` shows a bar over the items.
    """
    if stage not in STAGES:
        raise EvalInputError(f"stage must be one of {', '.join(STAGES)}, not {stage!r}")
    plan = plan_scoring(gold, rows, questions, texts, unanswerable, papers)
    tables = _scored_tables(gold, plan, stage)
    prepare = getattr(similarity, "prepare", None)
    if prepare is not None:  # embed every answer an item compares, once, before scoring
        prepare(_compared_texts(tables))
    bar = _progress_bar(sum(len(t.items) for t in tables), progress)
    table: list[TableRow] = []
    for planned in tables:
        items, unanswered = [], 0
        for planned_item in planned.items:
            item = score_item(planned_item.gold, planned_item.answers, similarity, threshold, whole_word_max_len)
            if planned_item.paper in plan.failed:
                item = _failed(item)
            unanswered += bool(item.n_gold and not item.n_pred)
            items.append(item)
            bar.update()
        table.append(TableRow(planned.question, planned.group, _stage_label(planned.used), aggregate(items),
                              items=items, unanswered=unanswered, empty_gold=planned.empty_gold,
                              failed=planned.failed, left_out=plan.left_out.get(planned.question, 0)))
    bar.close()
    if bootstrap:
        add_intervals(table, bootstrap, seed)
    return table


@dataclass
class PlannedItem:
    """One paper of a table row, before scoring: its gold list and the row's prediction list."""

    paper: str
    gold: list[str]
    answers: list[str]


@dataclass
class PlannedRow:
    """A table row's items before scoring, and the counts its footnote needs."""

    question: str
    group: str
    items: list[PlannedItem]
    used: list[str]  # the stage each paper's answers came from ("" where the row answered nothing)
    empty_gold: int
    failed: int


def _scored_tables(gold: dict[str, dict[str, list[str]]], plan: ScoringPlan, stage: str) -> list[PlannedRow]:
    """Every table row's (gold, predictions) items, in table order, with nothing scored yet."""
    preds = plan.preds
    planned: list[PlannedRow] = []
    for question in plan.questions:
        question_papers = plan.papers[question]
        if not question_papers:
            logger.warning("%s: no paper to score (no gold for the papers predicted); question skipped", question)
            continue
        golds = [gold.get(question, {}).get(p, []) for p in question_papers]
        empty = sum(not clean_answers(g) for g in golds)
        n_failed = sum(p in plan.failed for p in question_papers)
        for group in preds.groups:
            if not preds.has(group, question, stage):
                continue
            items, used = [], []
            for paper, paper_gold in zip(question_papers, golds):
                answers, source = preds.answers(group, question, paper, stage)
                used.append(source)
                items.append(PlannedItem(paper, paper_gold, answers))
            planned.append(PlannedRow(question, group, items, used, empty, n_failed))
    return planned


def _compared_texts(tables: Sequence[PlannedRow]) -> set[str]:
    """The answers Similar Match compares (as :func:`score_item` cleans them): both lists of the items where
    each has an answer."""
    texts: set[str] = set()
    for planned in tables:
        for item in planned.items:
            gold, answers = clean_answers(item.gold), clean_answers(item.answers)
            if gold and answers:
                texts.update(gold)
                texts.update(answers)
    return texts


def _progress_bar(total: int, progress: bool):
    """A tqdm bar over the items scored (disabled unless ``progress``)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="scoring", unit="item", disable=not progress or total == 0)


def _failed(item: ItemScore) -> ItemScore:
    """A paper the run failed on scores 0, also where its gold is empty (it did not answer "nothing")."""
    if item.n_gold:
        return item  # nothing predicted against gold answers: 0 already
    return replace(item, em=0.0, ment=0.0, smat=None if item.smat is None else 0.0, concat_f1=0.0)


def _stage_label(used: Sequence[str]) -> str:
    """``normalized``, ``extractive``, or e.g. ``normalized 30/34`` when papers fell back to extractive."""
    used = [u for u in used if u]  # papers this row answered nothing for say nothing about the stage
    kinds = set(used)
    if len(kinds) <= 1:
        return next(iter(kinds), "")
    return f"normalized {used.count('normalized')}/{len(used)}"


def add_intervals(table: list[TableRow], samples: int, seed: int = 0, level: float = 0.95) -> None:
    """Percentile bootstrap over papers; the same resamples for every model of a question (paired).

    Each resample is aggregated like the table, so papers with an undefined F1 (empty gold) are skipped in that
    resample's F1 mean; a resample holding none but such papers has no F1 and is skipped in the percentiles.
    """
    rng = np.random.default_rng(seed)
    by_question: dict[str, list[TableRow]] = defaultdict(list)
    for row in table:
        by_question[row.question].append(row)
    low, high = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    for rows in by_question.values():
        n = len(rows[0].items)
        if n == 0:
            continue
        draws = rng.integers(0, n, size=(samples, n))
        for row in rows:
            stats = [aggregate([row.items[i] for i in draw]) for draw in draws]
            for key in COLUMNS:
                if key == "n":
                    continue
                values = np.array([s[key] for s in stats], dtype=float)
                if np.isnan(values).all():
                    continue
                row.intervals[key] = (float(np.nanpercentile(values, low)), float(np.nanpercentile(values, high)))


def embedding_similarity(embedder: Any, gold: dict[str, dict[str, list[str]]], rows: Sequence[dict[str, Any]]
                         ) -> EmbeddingSimilarity:
    """Encode every gold and predicted answer once, then compare by cached dot product. :func:`evaluate` embeds
    only the answers it compares when given ``EmbeddingSimilarity(embedder)`` instead."""
    texts = {t for papers in gold.values() for spans in papers.values() for t in clean_answers(spans, False)}
    texts |= {str(r["answer"]).strip() for r in rows
              if str(r.get("stage") or "").lower() != "ungrounded" and str(r.get("answer") or "").strip()}
    similarity = EmbeddingSimilarity(embedder)
    similarity.prepare(texts)
    return similarity


# ----------------------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------------------


def _fmt(value: float, key: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if key == "n":
        return str(int(value))
    return f"{value:.2f}" if key in ("spans/answer", "words/span") else f"{value:.3f}"


def footnote(rows: Sequence[TableRow]) -> list[str]:
    """The lines under a question's table: how the scoring rules applied to it, with the counts."""
    if not rows:
        return []
    first = rows[0]
    n = len(first.items)
    unanswered = ", ".join(f"{r.model} {r.unanswered}" for r in rows)
    lines = [f"n = {n} papers. Papers with gold answers and no prediction score 0 ({unanswered})."]
    if first.failed:
        lines[0] += (f" {first.failed} paper(s) the run failed on (papers sheet status) score 0 on every "
                     "metric.")
    if first.left_out:
        lines[0] += (f" {first.left_out} gold paper(s) not mentioned in the predictions are left out "
                     "(no texts given).")
    if first.empty_gold:
        lines.append(f"Empty gold ({first.empty_gold} papers): EM, Ment and SMat 1 if nothing is predicted, else 0; "
                     f"F1 left out (F1 mean over the other {n - first.empty_gold}).")
    return lines


def to_markdown(table: Sequence[TableRow], columns: Sequence[str] = COLUMNS) -> str:
    """One Markdown table per question and its footnote; with intervals a cell reads ``0.685 [0.610, 0.752]``."""
    out: list[str] = []
    for question in dict.fromkeys(r.question for r in table):
        rows = [r for r in table if r.question == question]
        out.append(f"### {question}\n")
        out.append("| model | stage | " + " | ".join(columns) + " |")
        out.append("|---|---|" + "---:|" * len(columns))
        for row in rows:
            cells = []
            for key in columns:
                cell = _fmt(row.metrics.get(key, math.nan), key)
                if key in row.intervals:
                    lo, hi = row.intervals[key]
                    cell += f" [{_fmt(lo, key)}, {_fmt(hi, key)}]"
                cells.append(cell)
            out.append(f"| {row.model} | {row.stage} | " + " | ".join(cells) + " |")
        out.append("")
        out.extend(footnote(rows))
        out.append("")
    return "\n".join(out)


def to_csv(table: Sequence[TableRow], columns: Sequence[str] = COLUMNS) -> str:
    """Long CSV: one line per question and model; ``<metric>_lo``/``_hi`` columns when intervals exist."""
    from mlpsych.export import csv_text  # question ids and model names come from gold and prediction files

    with_ci = any(r.intervals for r in table)
    header = ["question", "model", "stage", *columns]
    if with_ci:
        header += [f"{k}_{side}" for k in columns if k != "n" for side in ("lo", "hi")]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in table:
        line: list[Any] = [csv_text(row.question), csv_text(row.model), csv_text(row.stage)]
        line += [_csv_number(row.metrics.get(k, math.nan)) for k in columns]
        if with_ci:
            for key in columns:
                if key != "n":
                    lo, hi = row.intervals.get(key, (math.nan, math.nan))
                    line += [_csv_number(lo), _csv_number(hi)]
        writer.writerow(line)
    return buffer.getvalue()


def _csv_number(value: float) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.6g}"
