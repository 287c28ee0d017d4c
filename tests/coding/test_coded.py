"""Coded sheets and gold read back as labelled spans of the papers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlpsych.coding.coded import coding_from_gold, coding_from_sheets, locate
from mlpsych.documents import Document
from mlpsych.errors import EvalInputError

from .conftest import PAPER_A, PAPER_B, answer_row, write_sheet


def test_locate_exact_loose_and_nearest():
    text = "Random  Forests here. random forests there. random forests again."
    assert locate("random forests", text) == (22, 36)
    assert locate("random forests", text, near=50) == (44, 58)
    assert locate("RANDOM forests", text) == (0, 15)  # case and spacing differ: the loose match
    assert locate("boosting", text) is None
    assert locate("  ", text) is None


def test_sheet_rows_become_positives_negatives_and_skips(coded_sheet: Path, documents):
    coding = coding_from_sheets([coded_sheet], documents)
    assert coding.pairs == {("A", "q1"), ("A", "q2")}  # paper B was not coded: unused
    by = {(s.text, s.how): s for s in coding.spans}
    assert set(by) == {("random forests", "accepted"), ("grid search", "wrong"),
                       ("Support vector machines", "corrected"), ("Support vector", "wrong"), ("caret", "added"),
                       ("R", "accepted")}
    assert by[("random forests", "accepted")].correct and not by[("grid search", "wrong")].correct
    for span in coding.spans:
        assert PAPER_A[span.start:span.end] == span.text
    # a corrected answer not in the paper is reported and skipped; the wrong original stays a negative
    assert any("XGBoost" in line and "not in the paper" in line for line in coding.skipped)
    assert ("gradient boosting", "wrong") not in by  # ... unless the original is not in the paper either
    assert any("gradient boosting" in line for line in coding.skipped)


def test_shifted_offsets_are_relocated(tmp_path: Path, documents):
    sheet = write_sheet(tmp_path / "s.xlsx", [answer_row("B", PAPER_B, "q2", "gensim", correct="yes", shift=3)])
    span, = coding_from_sheets([sheet], documents).spans
    assert PAPER_B[span.start:span.end] == "gensim"


def test_two_coders_disagreeing_leave_the_span_out(tmp_path: Path, documents):
    one = write_sheet(tmp_path / "1.xlsx", [answer_row("B", PAPER_B, "q2", "gensim", correct="yes"),
                                            answer_row("B", PAPER_B, "q2", "Python", correct="yes")])
    two = write_sheet(tmp_path / "2.xlsx", [answer_row("B", PAPER_B, "q2", "gensim", correct="no")])
    coding = coding_from_sheets([one, two], documents)
    assert [s.text for s in coding.spans] == ["Python"]
    assert any("gensim" in line and "both" in line for line in coding.skipped)


def test_sheet_of_another_corpus_is_one_error_naming_its_papers(tmp_path: Path, documents):
    sheet = write_sheet(tmp_path / "other.xlsx", [answer_row("X1", "abc", "q1", "abc", correct="yes"),
                                                  answer_row("X2", "abc", "q1", "abc", correct="yes")])
    with pytest.raises(EvalInputError, match=r"2 paper\(s\) are not in the texts given: X1, X2"):
        coding_from_sheets([sheet], documents)


def test_gold_spans_are_positives_and_unanswerable_papers_are_coded(tmp_path: Path, documents):
    start = PAPER_A.index("random forests")
    gold = {"q1": {"A": [{"start": start + 2, "end": start + 16, "text": "random forests"}],
                   "B": [{"start": 0, "end": 1, "text": "Latent Dirichlet allocation"}]},
            "q2": {"B": [{"start": 0, "end": 0, "text": "gensim"}]},
            "q3": {"B": [{"start": 0, "end": 0, "text": "not in this paper at all"}]}}
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(gold), encoding="utf-8")
    coding = coding_from_gold(path, documents)
    assert coding.pairs == {("A", "q1"), ("B", "q1"), ("A", "q2"), ("B", "q2"), ("B", "q3")}
    assert {(s.paper_id, s.text) for s in coding.spans} == {("A", "random forests"), ("B", "gensim"),
                                                           ("B", "Latent Dirichlet allocation")}
    assert all(s.correct and s.how == "gold" for s in coding.spans)
    a = next(s for s in coding.spans if s.paper_id == "A")
    assert (a.start, a.end) == (start, start + 14)
    assert any("not in this paper" in line for line in coding.skipped)


def test_a_coded_row_without_paper_or_question_is_reported_not_a_crash(tmp_path: Path, documents):
    """A row a coder typed in by hand and left the paper_id blank crashed `mlpsych adapt` with KeyError ''."""
    sheet = write_sheet(tmp_path / "s.xlsx", [
        answer_row("", PAPER_A, "q1", "random forests", correct="yes", stage="coder"),
        answer_row("A", PAPER_A, None, "grid search", correct="no"),
        answer_row("B", PAPER_B, "q2", "gensim", correct="yes"),
    ])
    coding = coding_from_sheets([sheet], documents)
    assert [(s.paper_id, s.text) for s in coding.spans] == [("B", "gensim")]
    assert coding.pairs == {("B", "q2")}
    assert any("row 2" in line and "paper_id is blank" in line for line in coding.skipped)
    assert any("row 3" in line and "question_id is blank" in line for line in coding.skipped)


def test_gold_with_a_span_without_text_is_one_error(tmp_path: Path, documents):
    """`mlpsych adapt --gold` stopped with KeyError 'text' on a hand-written span holding offsets only, and with a
    TypeError on one whose text is null."""
    path = tmp_path / "gold.json"
    path.write_text(json.dumps({"q1": {"A": [{"start": 0, "end": 5}]}}), encoding="utf-8")
    with pytest.raises(EvalInputError, match="q1 A: an answer without \"text\""):
        coding_from_gold(path, documents)
    path.write_text(json.dumps({"q1": {"A": [{"text": None}, None, "", "random forests"]}}), encoding="utf-8")
    coding = coding_from_gold(path, documents)  # blank answers (a TypeError before) say nothing
    assert [s.text for s in coding.spans] == ["random forests"] and not coding.skipped


def test_a_coded_sheet_given_as_gold_is_one_error(coded_sheet: Path, documents):
    """`mlpsych calibrate --gold coded.xlsx` (and `adapt --gold`) ended in UnicodeDecodeError, shown as a bug."""
    with pytest.raises(EvalInputError, match=r"not JSON text \(a spreadsheet\?\).*--coded"):
        coding_from_gold(coded_sheet, documents)


def test_a_correction_typed_with_other_quotes_or_hyphens_is_found(tmp_path: Path, documents):
    """LibreOffice turns a coder's typed quotes into typographic ones, and ingest makes the paper's ASCII: such a
    corrected answer was reported "not in the paper" and its correction lost; so was one the coder put in quotes."""
    text = 'We used Ward\'s method and k-means, the "elbow" rule, and years 2018\u20132020.'
    assert locate("Ward\u2019s method", text) == (8, 21)
    assert locate("K\u2010means", text) == (26, 33)
    assert locate("the \u201celbow\u201d rule", text) == (35, 51)
    assert locate("2018-2020", text) == (63, 72)
    assert locate("\u201cWard's method\u201d", text) == (8, 21)
    assert locate('"elbow"', text) == (39, 46)  # quotes that are the paper's own stay in the span
    assert locate("Ward\u2019s methods", text) is None
    sheet = write_sheet(tmp_path / "s.xlsx", [
        answer_row("A", PAPER_A, "q1", "Support", correct="no", corrected="\u201cSupport vector machines\u201d")])
    coding = coding_from_sheets([sheet], documents)
    assert ("Support vector machines", "corrected") in {(s.text, s.how) for s in coding.spans}
    assert not coding.skipped


def test_an_added_answer_marked_wrong_afterwards_is_not_learnt_as_right(tmp_path: Path, documents):
    """The review view shows a coder's added answer with the same Correct? buttons, the only way to withdraw it:
    marked "no", `mlpsych adapt` still trained it as an answer to find."""
    sheet = write_sheet(tmp_path / "s.xlsx", [
        answer_row("A", PAPER_A, "q1", "grid search", stage="coder", correct="no"),
        answer_row("A", PAPER_A, "q1", "random forests", stage="coder"),
        answer_row("A", PAPER_A, "q2", "caret", stage="coder", correct="yes"),
    ])
    spans = {(s.text, s.how, s.correct) for s in coding_from_sheets([sheet], documents).spans}
    assert spans == {("grid search", "wrong", False), ("random forests", "added", True), ("caret", "added", True)}


def test_a_coders_answer_typed_without_an_accent_is_found_where_the_paper_has_it():
    """A coder typing "Naive Bayes" (no ï on the keyboard) for the paper's "Naïve Bayes" had the answer refused as
    not in the paper, and `mlpsych adapt` skipped it."""
    text = "Models were fitted in R. We compared Naïve Bayes with random forests."
    start, end = locate("naive bayes", text)
    assert text[start:end] == "Naïve Bayes"
    assert locate("Naïve Bayes", "We used naive Bayes.") == (8, 19)


def test_an_answer_from_an_older_mlpsychs_text_without_the_spaces_of_its_statistics_is_found(tmp_path: Path):
    """mlpsych before 2026-11-25 took the spaces out of reported statistics ("AUC of.71"); its sheets hold answers
    copied from that text. Coded with that version and given to today's `mlpsych adapt`, whose text keeps the
    statistics as printed, each such answer marked correct was skipped as "not in the paper" (seen on a 967c256
    sheet of examples/papers: 4 of 95 coded answers)."""
    text = "Self-reports gave an AUC of .71 (SD across folds = .02), r = .46 (95% CI [.37, .54]). The therapist left."
    assert text[slice(*locate("gave an AUC of.71", text))] == "gave an AUC of .71"
    assert text[slice(*locate("71 (SD across folds =.02", text))] == "71 (SD across folds = .02"
    assert text[slice(*locate("95% CI [.37,.54]", text))] == "95% CI [.37, .54]"
    assert locate("the rapist", text) is None  # spaces inside or between words still count
    assert locate("AUC of.72", text) is None
    documents = {"A": Document("A", text)}
    old = write_sheet(tmp_path / "old.xlsx", [
        ["A", "A.txt", "q3", "?", "95% CI [.37,.54]", "extractive", "m", False, True, 0.5, 60, 76, 1, "", None,
         "yes", None, None]])
    coding = coding_from_sheets([old], documents)
    assert not coding.skipped
    assert [(s.text, s.how, s.correct) for s in coding.spans] == [("95% CI [.37, .54]", "accepted", True)]
