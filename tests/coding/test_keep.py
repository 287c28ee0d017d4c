"""Coding kept from a coded sheet (`run --keep-coding`), without models: a written run, coded, kept in the next."""

from __future__ import annotations

from pathlib import Path

import pytest
from openpyxl import load_workbook

from mlpsych.answers import Answer
from mlpsych.coding.coded import coding_from_sheets
from mlpsych.coding.confidence import labelled
from mlpsych.coding.keep import is_coded, keep_coding, read_kept_coding
from mlpsych.documents import Document
from mlpsych.errors import EvalInputError
from mlpsych.evaluation.agree import read_codings
from mlpsych.evaluation.evaluate import read_sheet
from mlpsych.export import write_result
from mlpsych.marks import coded_answer, is_final, row_stage
from mlpsych.pipeline import RunResult, Settled
from mlpsych.pipeline.context import ModelPool, RunCounters, StageContext
from mlpsych.pipeline.follow_up import FollowUpStage
from mlpsych.pipeline.records import Level, Unit
from mlpsych.questions import parse_question_set
from mlpsych.settings import CascadeSettings, RetrievalSettings, RunSettings

QUESTIONS = parse_question_set({"name": "t", "questions": [
    {"id": "q1", "text": "What techniques were used?", "models": ["m"]},
    {"id": "q4", "text": "What was __PLACEHOLDER__ used for?", "models": ["m"], "bridge_from": "q1", "kind": "phrase"},
]}, "inline")
TEXT = "We used random forests to predict burnout, BERT to classify posts and LDA to find topics."
DOCS = [Document("A", TEXT, source_path="/papers/A.txt"), Document("B", TEXT, source_path="/papers/B.txt")]


def answer(paper: str, question: str, text: str, bridge: str | None = None, score: float = 0.5) -> Answer:
    start = TEXT.index(text)
    return Answer(paper, question, text, "extractive", ["m"], score, start, start + len(text), None, TEXT,
                  bridge, final=True, confidence=0.3)


def run(*answers: Answer) -> RunResult:
    return RunResult(list(DOCS), QUESTIONS, list(answers))


def coded_sheet(tmp_path: Path) -> Path:
    """A's q4 sub-question about BERT marked, with a second coder's column and a row typed in by hand (no stage)."""
    sheet = write_result(run(answer("A", "q1", "random forests"), answer("A", "q1", "BERT"),
                             answer("A", "q4", "to classify posts", "BERT"),
                             answer("A", "q4", "to predict burnout", "random forests"),
                             answer("B", "q1", "BERT")), tmp_path / "results.xlsx")
    book = load_workbook(sheet)
    answers = book["answers"]
    header = [c.value for c in answers[1]]
    answers.cell(row=1, column=len(header) + 1, value="correct_2")
    for number in range(2, answers.max_row + 1):
        if answers.cell(number, header.index("bridge_entity") + 1).value == "BERT":
            answers.cell(number, header.index("correct") + 1, "yes")
            answers.cell(number, len(header) + 1, "no")
    hand = dict(paper_id="A", question_id="q4", answer="predict burnout", bridge_entity="random forests",
                correct="yes")
    for name, value in hand.items():
        answers.cell(answers.max_row + 1 if name == "paper_id" else answers.max_row, header.index(name) + 1, value)
    book.save(tmp_path / "coded.xlsx")
    return tmp_path / "coded.xlsx"


def test_a_followups_sub_question_rows_are_kept_with_their_entity_and_every_coder_column(tmp_path):
    kept = read_kept_coding(coded_sheet(tmp_path))
    assert kept.pairs == {("A", "q4")} and len(kept.answers) == 3
    assert kept.papers_done(["A", "B"], ["q4"]) == {"A"} and kept.papers_done(["A", "B"], ["q1", "q4"]) == set()
    fresh = run(answer("A", "q1", "random forests", score=0.9),
                answer("A", "q4", "to predict burnout", "random forests"), answer("B", "q1", "BERT"))
    combined = keep_coding(fresh, kept, DOCS)
    new = read_sheet(write_result(combined, tmp_path / "new.xlsx"), "answers")
    old = read_sheet(tmp_path / "coded.xlsx", "answers")
    header = [c.value for c in load_workbook(tmp_path / "new.xlsx")["answers"][1]]
    assert header[-4:] == ["correct", "corrected_answer", "notes", "correct_2"]

    def rows(sheet: list[dict], question: str) -> list[tuple]:
        return sorted((r["paper_id"], r["answer"], r["bridge_entity"], r["question"], r["correct"], r["correct_2"],
                       r["stage"]) for r in sheet if r["question_id"] == question)

    hand = ("A", "predict burnout", "random forests", "What was random forests used for?", "yes", None, "coder")
    assert rows(new, "q4") == sorted([*[r for r in rows(old, "q4") if r[1] != "predict burnout"], hand])
    assert rows(new, "q1") == [("A", "random forests", None, "What techniques were used?", None, None,
                                "extractive"), ("B", "BERT", None, "What techniques were used?", None, None,
                                                "extractive")]  # this run's q1 rows: q1 was not coded
    assert combined.info.kept_coding.endswith("0 papers with every question coded not read again")  # A: q1 uncoded


def test_a_coded_row_is_a_coder_column_filled_in_or_an_added_answer():
    assert is_coded({"answer": "x", "correct": "yes"}) and is_coded({"answer": "x", "comment": "ask Ana"})
    assert is_coded({"answer": "x", "stage": "coder", "correct": None})
    assert not is_coded({"answer": "x", "stage": "extractive", "correct": " ", "score": 0.5, "_row": 2})


def test_a_sheet_without_coding_is_refused(tmp_path):
    sheet = write_result(run(answer("A", "q1", "BERT")), tmp_path / "results.xlsx")
    with pytest.raises(EvalInputError, match="none of its answers is coded"):
        read_kept_coding(sheet)


def test_a_row_typed_in_by_hand_is_a_coders_added_answer_for_every_command(tmp_path):
    """A row a coder typed into the sheet (stage and final left blank) was the tool's answer to `agree` (counted in
    its precision) and `adapt` (an accepted answer), left out by `calibrate` (not final), and a coder's added
    answer to --keep-coding: one reading now, a coder's added answer, on the coded sheet and on the kept one."""
    coded = coded_sheet(tmp_path)
    kept = write_result(keep_coding(run(), read_kept_coding(coded), DOCS), tmp_path / "kept.xlsx")
    for sheet in (coded, kept):
        rows = read_sheet(sheet, "answers")
        hand = [r for r in rows if r["answer"] == "predict burnout"]
        assert [(row_stage(r), is_final(r)) for r in hand] == [("coder", True)]
        codings, _ = read_codings(sheet)
        assert len(codings) == len(rows) - 1  # not the tool's answer: out of agree's precision
        spans = coding_from_sheets([sheet], {d.id: d for d in DOCS}).spans
        assert [s.how for s in spans if s.text == "predict burnout"] == ["added"]
        marked = labelled(rows, {d.id: d.text for d in DOCS}, {}, lambda row, item: True)
        assert len(marked.y) == len(rows) - 1  # calibrate: every final row of the tool's, the hand row not


def coded_techniques(tmp_path: Path, *, followup_coded: bool = False) -> Path:
    """A's q1 coded: random forests accepted, "burnout" marked wrong, "BERT to classify" corrected to BERT (no
    mark, as the review view writes a correction), LDA added by the coder; B not coded. ``followup_coded``: A's q4
    coded too (a note on its one row)."""
    sheet = write_result(run(answer("A", "q1", "random forests"), answer("A", "q1", "burnout"),
                             answer("A", "q1", "BERT to classify"),
                             answer("A", "q4", "to predict burnout", "random forests"),
                             answer("B", "q1", "BERT")), tmp_path / "results.xlsx")
    book = load_workbook(sheet)
    answers = book["answers"]
    column = {c.value: c.column for c in answers[1]}
    coding = {"random forests": {"correct": "yes"}, "burnout": {"correct": "no"},
              "BERT to classify": {"corrected_answer": "BERT"}}
    for row in range(2, answers.max_row + 1):
        if answers.cell(row, column["paper_id"]).value == "A":
            cells = coding.get(answers.cell(row, column["answer"]).value, {})
            if followup_coded and answers.cell(row, column["question_id"]).value == "q4":
                cells = {"notes": "checked"}
            for name, value in cells.items():
                answers.cell(row, column[name], value)
    added = answers.max_row + 1
    for name, value in {"paper_id": "A", "question_id": "q1", "answer": "LDA", "stage": "coder"}.items():
        answers.cell(added, column[name], value)
    book.save(tmp_path / "coded.xlsx")
    return tmp_path / "coded.xlsx"


def followups(result: RunResult, settled: Settled, settings: RunSettings | None = None) -> list[tuple[str, str]]:
    """(paper, entity) of each q4 sub-question the follow-up stage makes of ``result``'s answers, ``settled`` as a
    kept coding settles the run."""
    settings = settings or RunSettings()
    level = Level([QUESTIONS.get("q4")], DOCS)
    FollowUpStage(settings).run(level, StageContext(settings, None, result, RunCounters(), ModelPool(), [],
                                                    settled=settled))
    return [(u.doc.id, u.query.bridge_entity) for u in level.units]


def test_a_followup_asks_about_the_coding_of_the_question_it_follows(tmp_path):
    """A rerun asked q4 about its own q1 answers even where a coder had coded q1: about "burnout", marked wrong,
    about "BERT to classify", corrected to BERT, and never about LDA, which the coder added. In A it asks about the
    coding's answers now; in B, not coded, about the run's; the run's summary says how many came from coding."""
    kept = read_kept_coding(coded_techniques(tmp_path))
    fresh = run(answer("A", "q1", "random forests", score=0.9), answer("A", "q1", "burnout", score=0.8),
                answer("A", "q1", "BERT to classify", score=0.7), answer("B", "q1", "BERT"))
    assert followups(fresh, kept.settles(QUESTIONS.questions, ["A", "B"])) == [
        ("A", "random forests"), ("A", "BERT"), ("A", "LDA"), ("B", "BERT")]
    assert fresh.info.coded_entities == 3
    combined = keep_coding(fresh, kept, DOCS)
    assert combined.info.kept_coding.endswith("; 3 follow-up entities asked about from the coding")
    without = followups(run(*fresh.answers), Settled())
    assert without == [("A", "random forests"), ("A", "burnout"), ("A", "BERT to classify"), ("B", "BERT")]


def test_the_cap_on_sub_questions_bounds_the_runs_own_answers_not_a_coders_list(tmp_path):
    """``--max-sub-questions 2`` asked about the first two of the coding's three q1 answers in A, and the run's
    note said the other was left out as not among "the best-scored": a coder's list is asked about whole; B, not
    coded, still asks about its two best-scored answers, and only B is named as capped."""
    kept = read_kept_coding(coded_techniques(tmp_path))
    fresh = run(answer("A", "q1", "random forests", score=0.9), answer("B", "q1", "BERT", score=0.9),
                answer("B", "q1", "LDA", score=0.5), answer("B", "q1", "burnout", score=0.7))
    asked = followups(fresh, kept.settles(QUESTIONS.questions, ["A", "B"]), RunSettings(max_sub_questions=2))
    assert asked == [("A", "random forests"), ("A", "BERT"), ("A", "LDA"), ("B", "BERT"), ("B", "burnout")]
    assert fresh.info.coded_entities == 3
    assert {q: record["papers"] for q, record in fresh.info.capped.items()} == {"q4": {"B": 1}}


def test_a_coded_followup_stands_and_is_not_bridged_from_the_coding(tmp_path):
    """Where q4 is coded too, its rows stand as coded: nothing of the coding's q1 is asked for it, nor of the
    run's (the rerun asked A's q4 about its own q1 answers, then threw the answers away); a question that follows
    none, or a paper the run does not read, gets nothing either."""
    kept = read_kept_coding(coded_techniques(tmp_path, followup_coded=True))
    assert kept.pairs == {("A", "q1"), ("A", "q4")}
    assert kept.bridges(QUESTIONS.questions, ["A", "B"]).entities == {}
    settled = kept.settles(QUESTIONS.questions, ["A", "B"])
    assert settled.pairs == {"A": ["q1", "q4"]}
    fresh = run(answer("A", "q1", "random forests"), answer("B", "q1", "BERT"))
    assert followups(fresh, settled) == [("B", "BERT")]
    assert Settled.from_json(settled.only(["A"]).to_json()) == Settled({"A": ["q1", "q4"]})
    assert read_kept_coding(coded_techniques(tmp_path)).bridges(QUESTIONS.questions, ["B"]).entities == {}


def test_a_followup_of_a_coded_bridge_question_chooses_its_windows_as_without_its_read(tmp_path):
    """Under ``bridge_windows: source`` q4's sub-questions read the windows chosen for their paper's q1. Where the
    coding settles q1 it is not read (no unit, no windows chosen): A's sub-questions about the coding's answers
    choose their windows as a sub-question without a source does; B's, its q1 read, read q1's windows."""
    settings = RunSettings(retrieval=RetrievalSettings(cascade=CascadeSettings(bridge_windows="source")))
    stage = FollowUpStage(settings)
    q1, q4 = QUESTIONS.get("q1"), QUESTIONS.get("q4")
    settled = read_kept_coding(coded_techniques(tmp_path)).settles(QUESTIONS.questions, ["A", "B"])
    assert settled.covers("A", "q1") and not settled.covers("B", "q1")
    everywhere = ((0, len(TEXT)),)
    first = Level([q1], DOCS, units=[Unit(DOCS[1], q1, stage.query(q1, q1.text), chosen={"m": everywhere})])
    level = Level([q4], DOCS)
    ctx = StageContext(settings, None, run(answer("B", "q1", "BERT")), RunCounters(), ModelPool(), [],
                       levels=[first, level], settled=settled)
    stage.run(level, ctx)
    assert [(u.doc.id, u.query.bridge_entity, u.source) for u in level.units] == [
        ("A", "random forests", {}), ("A", "BERT", {}), ("A", "LDA", {}), ("B", "BERT", {"m": everywhere})]


def test_what_a_coded_row_leaves_among_the_papers_answers():
    """The correction whatever the mark, the answer unless judged wrong (an unmarked one stands, as in the sheet),
    an added answer until marked wrong; nothing of a row that is not final."""
    assert coded_answer({"answer": "RF", "correct": "yes"}) == "RF"
    assert coded_answer({"answer": "RF", "correct": None}) == "RF"
    assert coded_answer({"answer": "RF", "correct": "no"}) is None
    assert coded_answer({"answer": "RF", "correct": "no", "corrected_answer": "random forests"}) == "random forests"
    assert coded_answer({"answer": "RF", "correct": "yes", "corrected_answer": "random forests"}) == "random forests"
    assert coded_answer({"answer": "LDA", "stage": "", "correct": None}) == "LDA"  # typed in by hand
    assert coded_answer({"answer": "LDA", "stage": "coder", "correct": "no"}) is None  # withdrawn
    assert coded_answer({"answer": "RF", "stage": "extractive", "final": False, "correct": "yes"}) is None
    assert coded_answer({"answer": "XGBoost", "stage": "ungrounded", "corrected_answer": "boosting"}) is None
    with pytest.raises(ValueError):
        coded_answer({"answer": "RF", "correct": "x"})
