"""One answer for the two names a paper defines for one thing."""

from __future__ import annotations

from mlpsych.answers import Answer, AnswerStage, Span
from mlpsych.documents import Document
from mlpsych.reading.abbreviations import link_abbreviations

TEXT = (
    "Intro.\n\nWe trained random forests (RF) and support vector machines (SVM; Vapnik, 1995) on the essays. "
    "Latent Dirichlet allocation (LDA) found topics. RF was best, and the random forest importances were stable. "
    "Linear discriminant analysis (LDA) was a baseline. Logistic regression too."
)


def doc() -> Document:
    split = TEXT.index("Latent")
    return Document(id="p1", text=TEXT, pages=[(0, split), (split, len(TEXT))])


def answer(text: str, score: float, model: str = "m1", occurrence: int = 0) -> Answer:
    start = -1
    for _ in range(occurrence + 1):
        start = TEXT.index(text, start + 1)
    end = start + len(text)
    return Answer("p1", "q1", text, AnswerStage.EXTRACTIVE, [model], score, start, end,
                  spans=[Span("p1", "q1", model, text, start, end, score)])


def texts(answers: list[Answer]) -> list[str]:
    return [a.text for a in answers]


def test_an_abbreviation_and_its_long_form_become_the_definition_in_place_of_the_first():
    answers = [answer("Logistic regression", 0.9), answer("RF", 0.8, "m2", occurrence=1),
               answer("random forest", 0.5, occurrence=0)]
    linked = link_abbreviations(doc(), answers, "pairs")
    assert texts(linked) == ["Logistic regression", "random forests (RF)"]
    one = linked[1]
    start = TEXT.index("random forests (RF)")
    assert (one.start, one.end) == (start, start + len("random forests (RF)"))
    assert TEXT[one.start:one.end] == one.text  # an exact span of the paper
    assert one.score == 0.8 and one.models == ["m1", "m2"] and len(one.spans) == 2
    assert one.page == 1 and "We trained random forests (RF)" in one.evidence


def test_pairs_leaves_a_name_answered_once_and_all_replaces_it():
    answers = [answer("RF", 0.8, occurrence=1), answer("Logistic regression", 0.3)]
    assert texts(link_abbreviations(doc(), answers, "pairs")) == ["RF", "Logistic regression"]
    assert texts(link_abbreviations(doc(), answers, "all")) == ["random forests (RF)", "Logistic regression"]
    assert link_abbreviations(doc(), answers, "off") is answers


def test_the_definition_itself_joins_its_names_and_repeats_give_one_answer():
    answers = [answer("random forests (RF)", 0.4), answer("RF", 0.7, occurrence=1),
               answer("random forest", 0.6)]
    linked = link_abbreviations(doc(), answers, "pairs")
    assert texts(linked) == ["random forests (RF)"] and linked[0].score == 0.7


def test_an_abbreviation_the_paper_defines_twice_is_not_linked_to_either_long_form():
    answers = [answer("LDA", 0.9, occurrence=0), answer("Latent Dirichlet allocation", 0.5)]
    assert texts(link_abbreviations(doc(), answers, "pairs")) == ["LDA", "Latent Dirichlet allocation"]
    # the long form alone is one definition's: "all" shows it as defined, the abbreviation stays as read
    assert texts(link_abbreviations(doc(), answers, "all")) == ["LDA", "Latent Dirichlet allocation (LDA)"]


def test_a_definition_without_a_closing_bracket_right_after_is_not_a_span_to_show():
    answers = [answer("SVM", 0.9), answer("support vector machines", 0.5)]  # "(SVM; Vapnik, 1995)"
    assert texts(link_abbreviations(doc(), answers, "all")) == ["SVM", "support vector machines"]
