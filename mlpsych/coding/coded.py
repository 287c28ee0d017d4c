"""Coders' answers as labelled spans of the papers: from coded results sheets or from hand-coded gold.

A results sheet's ``answers`` rows carry the coder columns (``correct``, ``corrected_answer``, ``notes``): a
corrected answer is a positive span where the corrected text is found in the paper (near the original answer); the
original is a positive where marked correct (and not corrected), a negative where judged wrong (marked so, or
corrected and left unmarked, as `mlpsych agree` counts it: :func:`mlpsych.marks.verdict`), and rows whose
``stage`` is ``coder`` (answers a coder added) are positives, or negatives once marked wrong (the review view's
one way to withdraw one). Only the (paper, question) pairs a coder touched are used: a pair nobody coded says
nothing about what is right. Gold in the ``mlpsych eval --gold`` format is coding
of every answer of its papers: all its spans are positives.

Every span is located in the paper's text (the offsets given when they still match it, else the text itself,
nearest to the offsets), so ingest's text normalization or a sheet edited by hand does not shift labels.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from mlpsych.answers import AnswerStage
from mlpsych.documents import Document
from mlpsych.errors import PapersNotInTexts
from mlpsych.marks import UNREADABLE_HINT, row_stage, verdict
from mlpsych.normalize.grounding import ALIKE, alike_pattern, fold_accents

log = logging.getLogger(__name__)

CODER_STAGE = AnswerStage.CODER.value  # the ``stage`` of an answer a coder added (the review view writes it)


@dataclass(frozen=True)
class CodedSpan:
    """One labelled span: ``correct`` True is an answer to the question, False one a coder marked wrong."""

    paper_id: str
    question_id: str
    text: str
    start: int
    end: int
    correct: bool
    how: str  # accepted, corrected, added, wrong or gold
    bridge_entity: str | None = None


@dataclass
class Coding:
    """The labelled spans of a corpus, the (paper, question) pairs coded, and what could not be used (why)."""

    spans: list[CodedSpan] = field(default_factory=list)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)

    @property
    def papers(self) -> list[str]:
        return sorted({paper for paper, _ in self.pairs})

    @property
    def questions(self) -> list[str]:
        return sorted({question for _, question in self.pairs})

    def only(self, papers: Iterable[str]) -> "Coding":
        """The coding of these papers alone (cross-fitting: adapt on some papers, score the others)."""
        keep = set(papers)
        return Coding([s for s in self.spans if s.paper_id in keep], {p for p in self.pairs if p[0] in keep},
                      list(self.skipped))


_QUOTES = ALIKE[0] + ALIKE[1]


def _loose(needle: str) -> str:
    """``needle`` as a regex for the same text in other spacing and forms of quotes and hyphens. A word ending in a
    hyphen before the next is a word broken at a line's end as a PDF viewer copies it ("ma- chines"): it also matches
    the word joined, as ingest joins it ("machines")."""
    words = needle.split()
    pattern = []
    for i, word in enumerate(words):
        broken = i + 1 < len(words) and len(word) > 1 and word[-1] in ALIKE[2]
        pattern.append(alike_pattern(word[:-1] if broken else word))
        if i + 1 < len(words):
            pattern.append(f"{alike_pattern(word[-1])}?\\s*" if broken else r"\s+")
    return "".join(pattern)


def _respaced(needle: str) -> str:
    """``needle`` as a regex for the same characters with white space added or taken out beside punctuation, never
    inside or between words ("AUC of.71" for the paper's "AUC of .71", "[.37,.54]" for "[.37, .54]"). Sheets of
    mlpsych before 2026-11-25 hold such answers: its cleaning took those spaces out of reported statistics, and
    today's keeps them as printed, so a coded answer copied from the old text was "not in the paper" for `adapt`."""
    pieces: list[str] = []
    previous, spaced = "", False
    for char in needle:
        if char.isspace():
            spaced = True
            continue
        if previous:
            in_words = previous.isalnum() and char.isalnum()
            pieces.append((r"\s+" if spaced else "") if in_words else r"\s*")
        pieces.append(re.escape(char))
        previous, spaced = char, False
    return "".join(pieces)


def locate(needle: str, text: str, near: int | None = None) -> tuple[int, int] | None:
    """Char range of ``needle`` in ``text``: an exact occurrence, else one differing only in case, spacing, the form
    of quotes and hyphens and line-end hyphens (``_loose``), else the same with the characters ingest's unicode step
    changes in a paper's text changed alike (a copy from the PDF keeps its "ﬁ" ligatures and soft hyphens), else the
    same without quotes the coder put around it, else the same without letters' accents ("Naive" for "Naïve"), else
    the same with white space added or taken out beside punctuation (``_respaced``: an older mlpsych's text); the
    one nearest to ``near`` when it occurs several times. None when it is not in the text."""
    from mlpsych.ingest.clean import normalize_unicode

    needle = needle.strip()
    if not needle:
        return None
    found = [(m.start(), m.end()) for m in re.finditer(re.escape(needle), text)]
    if not found:
        found = [(m.start(), m.end()) for m in re.finditer(_loose(needle), text, flags=re.IGNORECASE)]
    if not found:
        for other in (normalize_unicode(needle).strip(), needle.strip(_QUOTES)):
            if other != needle and (span := locate(other, text, near)) is not None:
                return span
    if not found and not (needle.isascii() and text.isascii()):  # "Naive Bayes" typed for the paper's "Naïve"
        plain = fold_accents(text)
        found = [(m.start(), m.end()) for m in re.finditer(_loose(fold_accents(needle)), plain, flags=re.IGNORECASE)]
    if not found:
        found = [(m.start(), m.end()) for m in re.finditer(_respaced(needle), text, flags=re.IGNORECASE)]
    if not found:
        return None
    return min(found, key=lambda span: abs(span[0] - near)) if near is not None else found[0]


def cell_offset(value: Any) -> int | None:
    """A sheet or JSON cell as a char offset (None when blank or not a number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value or "").strip()
    return int(text) if text.isdigit() else None


def _place(text: str, doc: Document, start: Any, end: Any) -> tuple[int, int] | None:
    """The span's offsets when they still hold ``text``, else where ``text`` is (nearest to ``start``)."""
    a, b = cell_offset(start), cell_offset(end)
    if a is not None and b is not None and text.strip() and doc.text[a:b].strip() == text.strip():
        return a, b
    return locate(text, doc.text, a)


def row_papers(rows: Iterable[dict[str, Any]]) -> set[str]:
    """The papers a sheet's (or a run's) rows name; a row with its paper_id left blank names none."""
    return {str(r.get("paper_id") or "").strip() for r in rows} - {""}


def check_papers(papers: Iterable[str], documents: Iterable[str], source: str) -> None:
    """Every paper must be in TEXTS (``documents``: the ids): a sheet of another corpus is one error naming its
    papers."""
    missing = sorted(set(papers) - set(documents))
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise PapersNotInTexts(f"{source}: {len(missing)} paper(s) are not in the texts given: {shown} "
                               "(a sheet of another corpus, or the wrong --texts)", missing)


def coding_from_sheets(paths: Sequence[str | Path], documents: dict[str, Document]) -> Coding:
    """Labelled spans from coded results sheets (the rules of the module docstring); several sheets add up,
    and a span two coders marked differently is left out (reported in ``skipped``)."""
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.evaluation.sheets import check_coded

    coding = Coding()
    marks: dict[tuple[str, str, int, int, str | None], CodedSpan] = {}
    disputed: set[tuple[str, str, int, int, str | None]] = set()
    for path in paths:
        rows = read_sheet(path, "answers")
        check_coded(rows, path)
        check_papers(row_papers(rows), documents, str(path))
        for row in rows:
            for span in _row_spans(row, documents, coding, Path(path).name):
                key = (span.paper_id, span.question_id, span.start, span.end, span.bridge_entity)
                if key in marks and marks[key].correct != span.correct:
                    disputed.add(key)
                marks.setdefault(key, span)
    for key in disputed:
        coding.skipped.append(f"{key[0]} {key[1]}: {marks[key].text!r} marked both correct and wrong; left out")
    coding.spans = [s for k, s in marks.items() if k not in disputed]
    return coding


def _row_spans(row: dict[str, Any], documents: dict[str, Document], coding: Coding, sheet: str) -> list[CodedSpan]:
    """The labelled spans of one answers row (none for an uncoded row); records the pair as coded."""
    paper = str(row.get("paper_id") or "").strip()
    question = str(row.get("question_id") or "").strip()
    answer = str(row.get("answer") or "").strip()
    corrected = str(row.get("corrected_answer") or "").strip()
    stage = row_stage(row)
    entity = str(row.get("bridge_entity") or "").strip() or None
    where = f"{sheet} row {row.get('_row')} ({paper} {question})"
    try:
        judged = verdict(row)
    except ValueError:
        coding.skipped.append(f"{where}: unreadable mark {row.get('correct')!r} ({UNREADABLE_HINT})")
        return []
    added = stage == CODER_STAGE
    if judged is None and not corrected and not added:
        return []
    if not paper or not question:  # a row typed in by hand with a field left blank: nothing to tie it to
        blank = " and ".join(name for name, value in (("paper_id", paper), ("question_id", question)) if not value)
        coding.skipped.append(f"{where}: coded, but its {blank} is blank; skipped")
        return []
    coding.pairs.add((paper, question))
    doc = documents[paper]
    out = []
    if corrected:
        placed = _place(corrected, doc, row.get("start"), None)
        if placed is None:
            coding.skipped.append(f"{where}: corrected answer {corrected!r} is not in the paper; skipped")
        else:
            out.append(CodedSpan(paper, question, doc.text[placed[0]:placed[1]], *placed, True, "corrected", entity))
        if judged is not False or not answer:
            return out
    if not answer:
        return out
    placed = _place(answer, doc, row.get("start"), row.get("end"))
    if placed is None:
        coding.skipped.append(f"{where}: answer {answer!r} is not in the paper; skipped")
        return out
    correct = added if judged is None else judged  # an added answer marked wrong afterwards is withdrawn
    how = "wrong" if not correct else ("added" if added else "accepted")
    out.append(CodedSpan(paper, question, doc.text[placed[0]:placed[1]], *placed, correct, how, entity))
    return out


def coding_from_gold(path: str | Path, documents: dict[str, Document], unanswerable: Sequence[str] = ("q2",),
                     anchor: str = "q1") -> Coding:
    """Labelled spans from hand-coded gold (``{question: {paper: [{start, end, text}]}}``, as ``mlpsych eval
    --gold`` reads): each paper of the ``anchor`` question is coded for every question it has gold for, and for
    the ``unanswerable`` questions also where it has none (its answer is "nothing")."""
    from mlpsych.evaluation.evaluate import evaluation_papers, gold_from_dict, read_gold_json
    from mlpsych.ingest.textnorm import normalize_text

    data = read_gold_json(path)
    gold_from_dict(data, str(path))  # the shape, checked as `mlpsych eval` checks it
    gold = {q: {normalize_text(str(p)): spans or [] for p, spans in papers.items()} for q, papers in data.items()}
    check_papers({p for papers in gold.values() for p in papers}, documents, str(path))
    coding = Coding()
    for question in gold:
        for paper in evaluation_papers(gold, question, unanswerable, anchor):
            coding.pairs.add((paper, question))
            doc = documents[paper]
            for span in gold[question].get(paper, []):
                raw = span["text"] if isinstance(span, dict) else span
                text = normalize_text("" if raw is None else str(raw))
                if not text.strip():
                    continue  # a blank gold answer, dropped as `mlpsych eval` drops it
                start = span.get("start") if isinstance(span, dict) else None
                placed = _place(text, doc, start, span.get("end") if isinstance(span, dict) else None)
                if placed is None:
                    coding.skipped.append(f"{paper} {question}: gold answer {text!r} is not in the paper; skipped")
                    continue
                coding.spans.append(CodedSpan(paper, question, doc.text[placed[0]:placed[1]], *placed, True, "gold"))
    return coding
