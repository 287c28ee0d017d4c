"""Merging spans by the paper's rules, and combining models."""

from __future__ import annotations

from mlpsych.answers import Span
from mlpsych.documents import Document
from mlpsych.reading.merge import combine, merge_spans, trim

TEXT = (
    "We trained random forests (RF) and support vector machines. "
    "The random forest classifier was tuned with 10-fold cross-validation. "
    "Results (see Table 2) are shown; 95% of cases, 0.87."
)


def doc() -> Document:
    return Document(id="p1", text=TEXT)


def span(text: str, score: float, model: str = "m1", occurrence: int = 0) -> Span:
    start = -1
    for _ in range(occurrence + 1):
        start = TEXT.index(text, start + 1)
    return Span("p1", "q1", model, text, start, start + len(text), score)


def test_overlapping_positions_merge_into_one_span():
    a = span("random forests", 0.9)
    b = span("forests (RF)", 0.4)
    answers = merge_spans(doc(), [a, b])
    assert [x.text for x in answers] == ["random forests (RF)"]
    assert answers[0].score == 0.9
    assert (answers[0].start, answers[0].end) == (a.start, b.end)
    assert len(answers[0].spans) == 2


def test_nested_texts_keep_the_longer():
    # "random forest" (second sentence) is nested in "random forest classifier" at another position.
    short = span("random forest", 0.8, occurrence=1)
    long = span("random forest classifier", 0.3)
    answers = merge_spans(doc(), [short, long])
    assert [x.text for x in answers] == ["random forest classifier"]
    assert answers[0].score == 0.8


def test_trimming_junk_and_dropping_answers_without_letters():
    start = TEXT.index(" support")
    messy = Span("p1", "q1", "m1", TEXT[start : start + 25], start, start + 25, 0.5)  # " support vector machines."
    assert messy.text == " support vector machines."
    cleaned = trim(doc(), messy.start, messy.end)
    assert TEXT[cleaned[0] : cleaned[1]] == "support vector machines"
    numbers = span("0.87", 0.99)
    percent = span("95%", 0.95)
    cv = span("10-fold cross-validation.", 0.7)
    answers = merge_spans(doc(), [numbers, percent, cv])
    assert [a.text for a in answers] == ["10-fold cross-validation"]


def test_leading_parenthesis_and_semicolon_are_trimmed():
    paren = span("(RF) and", 0.5)
    answers = merge_spans(doc(), [paren])
    assert answers[0].text == "RF) and"


def test_merge_off_keeps_separate_spans_but_removes_identical_texts():
    a = span("random forests", 0.9)
    b = span("forests (RF)", 0.4)
    again = Span("p1", "q1", "m1", "random forests", a.start, a.end, 0.2)
    answers = merge_spans(doc(), [a, b, again], merge=False)
    assert sorted(x.text for x in answers) == ["forests (RF)", "random forests"]


def test_one_letter_answers_are_not_swallowed_by_words():
    text = "Analyses used R and the randomForest package in R studio."
    d = Document(id="p", text=text)
    r_at = text.index(" R ") + 1
    r = Span("p", "q2", "m", "R", r_at, r_at + 1, 0.5)
    pkg = Span("p", "q2", "m", "randomForest package", text.index("randomForest"), text.index("randomForest") + 20, 0.4)
    answers = merge_spans(d, [r, pkg])
    assert sorted(a.text for a in answers) == ["R", "randomForest package"]


def test_combine_records_the_models_behind_each_answer():
    d = doc()
    spans = {
        "deberta": [span("random forests", 0.9, "deberta"), span("support vector machines", 0.6, "deberta")],
        "albert": [span("random forests (RF)", 0.7, "albert")],
    }
    answers = combine(d, spans)
    by_text = {a.text: a for a in answers}
    assert by_text["random forests (RF)"].models == ["albert", "deberta"]
    assert by_text["random forests (RF)"].score == 0.9
    assert by_text["support vector machines"].models == ["deberta"]
    assert [a.text for a in answers] == ["random forests (RF)", "support vector machines"]
