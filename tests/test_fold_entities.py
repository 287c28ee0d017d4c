"""Final answers of an entity question that name one entity written differently ("Random Forests" / "random
forest", "LASSO" / "lasso") become one answer where the settings fold them (``AnswerSettings.fold``); the
reference keeps the released code's rows."""

from __future__ import annotations

from mlpsych.documents import Document
from mlpsych.answers import Span
from mlpsych.pipeline.merge import unit_answers
from mlpsych.pipeline.records import Unit
from mlpsych.questions import QuestionTemplate
from mlpsych.reading.reader import Query
from mlpsych.settings import AnswerSettings, RunSettings, apply_preset

TEXT = ("We fitted Random Forests and LASSO models. "
        "A random forest ranked the predictors; lasso shrank them. "
        "Support vector machines were also fitted, and a second random forest was compared with them. "
        "Answers were coded by two raters.")


def _span(model: str, text: str, score: float, nth: int = 0, question: str = "q1") -> Span:
    start = -1
    for _ in range(nth + 1):
        start = TEXT.index(text, start + 1)
    return Span(doc_id="p", question_id=question, model=model, text=text, start=start, end=start + len(text),
                score=score)


def _unit(spans: dict[str, list[Span]], kind: str = "entity") -> Unit:
    question = QuestionTemplate(id="q1", text="What machine learning techniques were used?", kind=kind,
                                models=list(spans), top_k=30)
    query = Query(question_id="q1", text=question.text, top_k=30, max_answer_tokens=15)
    return Unit(doc=Document(id="p", text=TEXT), question=question, query=query, spans=spans)


ONE_MODEL = {"m": [_span("m", "Random Forests", 0.30), _span("m", "LASSO", 0.20), _span("m", "random forest", 0.25),
                   _span("m", "lasso", 0.40), _span("m", "random forest", 0.10, nth=1),
                   _span("m", "Support vector machines", 0.05)]}


def _finals(unit: Unit, **rules) -> list:
    return [a for a in unit_answers(unit, AnswerSettings(**rules)).rows if a.final]


def test_answers_naming_one_entity_written_differently_become_one_the_best_supported_with_the_highest_score():
    finals = _finals(_unit(ONE_MODEL), fold="entity")
    assert [a.text for a in finals] == ["random forest", "lasso", "Support vector machines"]
    forest, lasso = finals[0], finals[1]
    # "random forest", read twice (two spans), outweighs "Random Forests", read once; the best score of the three
    assert forest.score == 0.30 and len(forest.spans) == 3
    assert {s.text for s in forest.spans} == {"Random Forests", "random forest"}
    # equal support (one span each): the higher score's row
    assert lasso.score == 0.40 and len(lasso.spans) == 2 and lasso.models == ["m"]


def test_the_surviving_row_keeps_its_own_place_in_the_paper():
    forest, lasso = _finals(_unit(ONE_MODEL), fold="entity")[:2]
    for answer in (forest, lasso):
        assert TEXT[answer.start:answer.end] == answer.text
        assert answer.evidence == "A random forest ranked the predictors; lasso shrank them."


def test_kept_apart_by_default_off_and_in_phrase_questions():
    rows = ["Random Forests", "LASSO", "random forest", "lasso", "Support vector machines"]
    assert [a.text for a in _finals(_unit(ONE_MODEL), fold="exact")][:4] == rows[:4]
    phrase = _finals(_unit(ONE_MODEL, kind="phrase"), fold="entity")
    assert {"Random Forests", "random forest", "LASSO", "lasso"} <= {a.text for a in phrase}


def test_several_models_fold_the_combined_list_and_keep_each_models_own_rows():
    spans = {"a": [_span("a", "Random Forests", 0.3)], "b": [_span("b", "random forest", 0.6)]}
    rows = unit_answers(_unit(spans), AnswerSettings(fold="entity")).rows
    finals = [a for a in rows if a.final]
    assert len(finals) == 1 and finals[0].score == 0.6 and sorted(finals[0].models) == ["a", "b"]
    assert sorted(a.text for a in rows if not a.final) == ["Random Forests", "random forest"]


def test_the_reference_keeps_the_released_rows_and_the_default_folds():
    from mlpsych.questions import load_question_set

    questions = load_question_set("mlpsych")
    assert apply_preset("reference", questions, RunSettings())[1].answers.fold == "exact"
    assert RunSettings().answers.fold == "entity"
    assert apply_preset("paper", questions, RunSettings())[1].answers.fold == "entity"


def test_the_default_gives_a_coder_one_row_per_entity_and_the_reference_the_released_rows():
    from mlpsych.questions import load_question_set

    questions = load_question_set("mlpsych")
    default = [a.text for a in unit_answers(_unit(ONE_MODEL), RunSettings().answers).rows if a.final]
    assert default == ["random forest", "lasso", "Support vector machines"]
    fast = apply_preset("fast", questions, RunSettings())[1].answers
    assert [a.text for a in unit_answers(_unit(ONE_MODEL), fast).rows if a.final] == default
    reference = apply_preset("reference", questions, RunSettings())[1].answers
    assert [a.text for a in unit_answers(_unit(ONE_MODEL), reference).rows if a.final] == [
        "Random Forests", "LASSO", "random forest", "lasso", "Support vector machines"]
