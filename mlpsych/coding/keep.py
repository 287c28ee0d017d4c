"""A coded sheet's coding carried into a new run's sheet (`mlpsych run --keep-coding CODED`).

A study codes in rounds: papers are added to its folder, a question to its file, or the papers not coded yet are
re-read by a reader adapted on the coding so far. A rerun writes a new sheet (it never writes over a coded one), and
without this the study's coding ended up spread over several sheets, the new one uncoded.

For each (paper, question) a coder touched in CODED (:func:`coded_columns`: a cell a run does not write filled in,
or a row a coder added), CODED's rows of that paper and question, every one of them, stand in the new sheet instead
of the run's: as the run's own answer records (:class:`~mlpsych.answers.Answer` with their coder cells), so the
papers sheet and the frequencies count them as any answer and the coder columns are written back as they were.
Everything else is the run's. The run does not ask a coded pair at all (:meth:`KeptCoding.settles`: no read, cascade
read or LLM normalization of it), so a question added to a coded study's file reads that question alone, and a paper
whose every question of the run is coded is not read at all; coding of papers or questions the run does not have
stays in CODED only (a note says how much).

A follow-up question (q4, "What was X used for?") of a paper whose bridge question (q1) is coded, the follow-up
itself not, asks about the coding's answers to q1 (:meth:`KeptCoding.bridges`: :func:`~mlpsych.marks.coded_answer`
of each row), not the run's: a technique the coder added is asked about, one marked wrong is not, a corrected one
under the corrected text. A coded follow-up's rows stand as coded, as any coded question's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from mlpsych.answers import Answer, AnswerStage
from mlpsych.coding.coded import CODER_STAGE, cell_offset
from mlpsych.documents import Document
from mlpsych.errors import EvalInputError
from mlpsych.marks import coded_answer, is_final, row_stage, warn_unreadable
from mlpsych.multihop import CodedBridges
from mlpsych.pipeline import RunResult, Settled
from mlpsych.questions import QuestionTemplate

FLAG = "--keep-coding"


def run_columns() -> frozenset[str]:
    """The columns a run writes (and ``_row``, the reader's row number): every other column is the coders'."""
    from mlpsych.export import ANSWER_COLUMNS

    return frozenset({*ANSWER_COLUMNS, "_row"})


def coded_columns(row: dict[str, Any]) -> list[str]:
    """The columns of an answers row a coder filled in: any a run does not write (``correct``, ``corrected_answer``,
    ``notes``, a second coder's ``correct_2``, a column of the lab's own), so no coder's work counts as uncoded."""
    written = run_columns()
    return [k for k, v in row.items() if k not in written and str(v if v is not None else "").strip()]


def is_coded(row: dict[str, Any]) -> bool:
    """A row holds coding: a coder's column filled in, or an answer a coder added (stage ``coder``)."""
    return bool(coded_columns(row)) or row_stage(row) == CODER_STAGE


@dataclass(frozen=True)
class KeptCoding:
    """The coding of a coded sheet, to carry into a run: the (paper, question) pairs coded, all their rows, and
    each pair's answers as its coding leaves them (what a follow-up of the pair's question asks about)."""

    source: Path
    pairs: frozenset[tuple[str, str]]
    answers: list[Answer]
    coded_answers: dict[tuple[str, str], list[str]]

    def papers_done(self, papers: Iterable[str], questions: Iterable[str]) -> set[str]:
        """The papers every one of ``questions`` is coded for: nothing of them is left for the run to read."""
        asked = list(questions)
        return {p for p in papers if all((p, q) in self.pairs for q in asked)}

    def settles(self, questions: list[QuestionTemplate], papers: Iterable[str]) -> Settled:
        """What the coding settles in a run asking ``questions`` of ``papers``: the pairs coded, whose rows stand
        in the new sheet whatever the run answers (so it does not ask them), and the follow-ups asked about the
        coding's answers (:meth:`bridges`)."""
        ids = set(papers)
        asked = {q.id for q in questions}
        pairs: dict[str, list[str]] = {}
        for paper, question in sorted(self.pairs):
            if paper in ids and question in asked:
                pairs.setdefault(paper, []).append(question)
        return Settled(pairs, self.bridges(questions, sorted(ids)))

    def bridges(self, questions: Iterable[QuestionTemplate], papers: Iterable[str]) -> CodedBridges:
        """For each follow-up of ``questions`` and each of ``papers`` whose bridge question is coded, the follow-up
        not (its rows stand as coded, whatever the run asks), the coding's answers to the bridge question."""
        entities: dict[str, dict[str, list[str]]] = {}
        ids = list(papers)
        for q in questions:
            for paper in ids:
                if q.bridge_from and (paper, q.bridge_from) in self.pairs and (paper, q.id) not in self.pairs:
                    entities.setdefault(q.id, {})[paper] = self.coded_answers[(paper, q.bridge_from)]
        return CodedBridges(entities)


def read_kept_coding(path: Path) -> KeptCoding:
    """The coding of ``path`` (a results workbook or its CSV), read before any paper is: a sheet that is not a
    results sheet, or holds no coding, is one EvalInputError."""
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.evaluation.sheets import check_coded, check_sheet_file

    check_sheet_file(path, FLAG)
    rows = read_sheet(path, "answers")
    check_coded(rows, path)
    pairs = frozenset(_pair(row) for row in rows if is_coded(row) and all(_pair(row)))  # a blank id: tied to none
    if not pairs:
        raise EvalInputError(f"{FLAG} {path}: none of its answers is coded (a coder column such as correct, "
                             "corrected_answer or notes filled in, or an answer a coder added): there is no coding "
                             "to keep")
    kept = [row for row in rows if _pair(row) in pairs]
    warn_unreadable(kept, ["correct"], path)
    answered: dict[tuple[str, str], list[str]] = {pair: [] for pair in pairs}
    for row in kept:
        if text := _coded_text(row):
            answered[_pair(row)].append(text)
    return KeptCoding(path, pairs, [kept_answer(row) for row in kept], answered)


def _pair(row: dict[str, Any]) -> tuple[str, str]:
    return _text(row.get("paper_id")), _text(row.get("question_id"))


def _coded_text(row: dict[str, Any]) -> str | None:
    """:func:`~mlpsych.marks.coded_answer`; a mark it cannot read (warned of) read as none, the row's answer
    standing as the kept sheet shows it."""
    try:
        return coded_answer(row)
    except ValueError:
        return coded_answer({**row, "correct": None})


def kept_answer(row: dict[str, Any]) -> Answer:
    """An answers row as the run's answer record: the run's columns as its fields, the coders' as its ``coder``
    cells. A stage the run does not write (blank, in a row typed in by hand) is a coder's answer."""
    from mlpsych.evaluation.evaluate import parse_models, truthy

    try:
        stage = AnswerStage(row_stage(row))
    except ValueError:
        stage = AnswerStage.CODER
    written = run_columns()
    return Answer(doc_id=_text(row.get("paper_id")), question_id=_text(row.get("question_id")),
                  text=_cell(row.get("answer")), stage=stage, models=parse_models(row.get("models")),
                  score=_number(row.get("score")) or 0.0, start=cell_offset(row.get("start")),
                  end=cell_offset(row.get("end")), page=cell_offset(row.get("page")),
                  evidence=_cell(row.get("evidence")), bridge_entity=_text(row.get("bridge_entity")) or None,
                  ensemble=truthy(row.get("ensemble")), final=is_final(row),
                  confidence=_number(row.get("confidence")),
                  coder={k: v for k, v in row.items() if k not in written})


def keep_coding(result: RunResult, kept: KeptCoding, documents: list[Document]) -> RunResult:
    """The run's result with ``kept``'s rows instead of the run's for every (paper, question) coded, over all of
    ``documents`` (those not read too); what was kept, and the coding left in the sheet, noted in the run's facts."""
    papers = [d.id for d in documents]
    questions = [q.id for q in result.questions.questions]
    run_papers, run_questions = set(papers), set(questions)
    kept_pairs = {(p, q) for p, q in kept.pairs if p in run_papers and q in run_questions}
    answers = [a for a in result.answers if (a.doc_id, a.question_id) not in kept_pairs]
    answers += [a for a in kept.answers if (a.doc_id, a.question_id) in kept_pairs]
    outputs = [o for o in result.llm_outputs if (o.get("paper_id"), o.get("question_id")) not in kept_pairs]
    info = replace(result.info, warnings=[*result.info.warnings, *left_in_sheet(kept, papers, questions)],
                   kept_coding=_kept_sentence(kept, kept_pairs, kept.papers_done(papers, questions),
                                              result.info.coded_entities))
    return replace(result, documents=list(documents), answers=answers, llm_outputs=outputs, info=info)


def left_in_sheet(kept: KeptCoding, papers: list[str], questions: list[str]) -> list[str]:
    """A line for the coded papers this run does not have, one for the coded questions it does not ask."""
    lines = []
    source = kept.source
    other_papers = sorted({p for p, _ in kept.pairs} - set(papers))
    if other_papers:
        lines.append(f"{_count(other_papers, 'paper')} coded in {source} {_are(other_papers)} not among this run's "
                     f"papers: not in this sheet, their coding stays in {source}")
    other_questions = sorted({q for _, q in kept.pairs} - set(questions))
    if other_questions:
        lines.append(f"{_count(other_questions, 'question')} coded in {source} ({', '.join(other_questions)}) "
                     f"{_are(other_questions)} not asked by this run: not in this sheet, their coding stays in "
                     f"{source}")
    return lines


def _kept_sentence(kept: KeptCoding, pairs: set[tuple[str, str]], done: set[str], bridged: int) -> str:
    """What the run sheet and the summary say of the coding kept, and of the follow-ups' entities taken from it
    (``bridged``, when any)."""
    rows = sum((a.doc_id, a.question_id) in pairs for a in kept.answers)
    papers = {p for p, _ in pairs}
    sentence = (f"coding kept from {kept.source}: {rows} answers of {len(pairs)} coded (paper, question) pairs in "
                f"{_count(papers, 'paper')}, none asked again; {_count(done, 'paper')} with every question coded not "
                "read again")
    if bridged:
        sentence += f"; {bridged} follow-up {'entity' if bridged == 1 else 'entities'} asked about from the coding"
    return sentence


def _count(items: Iterable[Any], what: str) -> str:
    n = len(list(items))
    return f"{n} {what}{'' if n == 1 else 's'}"


def _are(items: list[Any]) -> str:
    return "is" if len(items) == 1 else "are"


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _text(value: Any) -> str:
    return _cell(value).strip()


def _number(value: Any) -> float | None:
    """A score or confidence cell as a number (None when blank or not one)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
