"""Bridge entities and sub-questions: q4 is asked once per grounded q1 entity, and only those."""

from __future__ import annotations

import pytest
from normalize.helpers import normalize_answers

from mlpsych.answers import Answer
from mlpsych.documents import Document
from mlpsych.multihop import bridge_entities, entities_to_ask, sub_questions
from mlpsych.normalize.llm import Normalizer, NormalizeResult
from mlpsych.pipeline.context import ModelPool, RunCounters, StageContext
from mlpsych.pipeline.follow_up import FollowUpStage
from mlpsych.pipeline.records import Level
from mlpsych.pipeline.result import RunResult
from mlpsych.questions import NormalizeSpec, QuestionSet, QuestionTemplate, RetrievalSpec, load_question_set
from mlpsych.settings import RunSettings

Q4 = QuestionTemplate(id="q4", text="What was __PLACEHOLDER__ used for?", kind="phrase", models=["m"],
                      bridge_from="q1", max_sub_questions=3)


def answer(text: str, stage: str, score: float) -> Answer:
    return Answer(doc_id="p", question_id="q1", text=text, stage=stage, models=["m"], score=score)


def test_grounded_normalized_answers_win() -> None:
    answers = [
        answer("random forest classifier", "extractive", 0.9),
        answer("SVM", "normalized", 0.2),
        answer("XGBoost", "ungrounded", 0.99),
        answer("random forest", "normalized", 0.8),
        answer("Random Forest", "normalized", 0.1),
    ]
    assert bridge_entities(answers, cap=10) == ["random forest", "SVM"]


def test_extractive_when_nothing_was_normalized() -> None:
    answers = [answer("LDA", "extractive", 0.3), answer("XGBoost", "ungrounded", 0.9),
               answer("k-means  clustering", "extractive", 0.6), answer("lda", "extractive", 0.1)]
    assert bridge_entities(answers, cap=10) == ["k-means clustering", "LDA"]


def test_only_ungrounded_gives_nothing() -> None:
    assert bridge_entities([answer("XGBoost", "ungrounded", 0.9)], cap=5) == []
    assert bridge_entities([], cap=5) == []


def test_cap() -> None:
    answers = [answer(f"method {i}", "normalized", 1 - i / 10) for i in range(6)]
    assert bridge_entities(answers, cap=2) == ["method 0", "method 1"]
    assert bridge_entities(answers, cap=0) == []


def test_sub_questions() -> None:
    assert sub_questions(Q4, ["random forest", "SVM"]) == [
        ("random forest", "What was random forest used for?"), ("SVM", "What was SVM used for?")]
    assert sub_questions(Q4, []) == []
    with pytest.raises(ValueError, match="no bridge_from"):
        sub_questions(QuestionTemplate(id="q1", text="Which methods?", models=["m"]), ["SVM"])


def test_also_ask_entities_are_added_only_when_retrieving() -> None:
    q4 = Q4.model_copy(update={"retrieval": RetrievalSpec(mode="bm25", also_ask=["machine learning", "SVM"])})
    assert entities_to_ask(q4, ["random forest", "svm"], retrieving=True) == ["random forest", "svm",
                                                                             "machine learning"]
    assert entities_to_ask(q4, ["random forest"], retrieving=False) == ["random forest"]
    assert entities_to_ask(Q4, ["random forest"], retrieving=True) == ["random forest"]  # no retrieval block


def test_library_q4_template() -> None:
    q4 = load_question_set("mlpsych").get("q4")
    assert sub_questions(q4, ["random forest"]) == [("random forest", "What was random forest used for?")]


class FixedOutputNormalizer(Normalizer):
    def __init__(self, raw: str) -> None:
        super().__init__("fixed")
        self.raw = raw

    def run(self, prompts: list[str], *, progress: bool = True) -> list[NormalizeResult]:
        from mlpsych.normalize.listparse import parse_list

        return [NormalizeResult(parse_list(self.raw), self.raw) for _ in prompts]


def test_sub_questions_are_exactly_the_grounded_q1_entities() -> None:
    text = ("We compared support vector machines (SVMs) with a random forest. Topics were modelled with latent "
            "Dirichlet allocation (LDA), and texts were scored with LIWC.")
    doc = Document(id="p", text=text)
    q1 = QuestionTemplate(id="q1", text="What techniques were used?", models=["a", "b"],
                          normalize=NormalizeSpec(prompt="List: {answers}"))
    extract = [Answer(doc_id="p", question_id="q1", text="a random forest", stage="extractive", models=["a"],
                      score=0.8, start=text.index("a random"), end=text.index("a random") + 15)]
    raw = "['SVM', 'Random forests', 'XGBoost', 'LDA', 'deep neural networks', 'random forest']"
    answers, _ = normalize_answers(doc, q1, {"a": extract, "b": []}, FixedOutputNormalizer(raw))
    grounded = [a.text for a in answers if a.stage == "normalized"]
    ungrounded = [a.text for a in answers if a.stage == "ungrounded"]
    assert sorted(grounded) == ["LDA", "Random forests", "SVM"]  # "random forest" merged with "Random forests"
    assert sorted(ungrounded) == ["XGBoost", "deep neural networks"]
    entities = bridge_entities(answers, cap=Q4.max_sub_questions)
    asked = sub_questions(Q4, entities)
    assert [entity for entity, _ in asked] == ["Random forests", "SVM", "LDA"]  # score 0.8 first, then LLM order
    assert {e for e, _ in asked} == set(grounded)
    assert all(q == f"What was {e} used for?" for e, q in asked)


def test_released_code_asks_every_item_as_written_ungrounded_included() -> None:
    answers = [answer("random forest", "normalized", 0.8), answer("Random Forest", "normalized", 0.1),
               answer("XGBoost", "ungrounded", 0.99), answer("SVM", "extractive", 0.9)]
    assert bridge_entities(answers, 10, "exact", ("normalized", "ungrounded")) == [
        "XGBoost", "random forest", "Random Forest"]


def test_papers_whose_bridge_answers_pass_the_cap_are_named_in_the_runs_notes() -> None:
    """--max-sub-questions 2 with four q1 techniques in a paper: q4 was asked about two and the sheets never said
    the other two were not asked (only an INFO line naming no paper); the run's notes (run sheet, end of the CLI's
    output) now name the paper and how many were left out."""
    q1 = QuestionTemplate(id="q1", text="What techniques were used?", models=["m"])
    q4 = Q4.model_copy(update={"max_sub_questions": 20})
    docs = [Document(id="many", text="SVM, random forest, LDA and BERT."), Document(id="one", text="SVM.")]
    found = [("many", "SVM", 0.9), ("many", "random forest", 0.8), ("many", "LDA", 0.7), ("many", "BERT", 0.6),
             ("one", "SVM", 0.9)]
    answers = [Answer(doc_id=d, question_id="q1", text=t, stage="normalized", models=["m"], score=s, final=True)
               for d, t, s in found]
    result = RunResult(docs, QuestionSet(questions=[q1, q4]), answers=answers)
    settings = RunSettings(max_sub_questions=2)
    level = Level([q4], docs)
    FollowUpStage(settings).run(level, StageContext(settings, None, result, RunCounters(), ModelPool(), []))
    asked = [(u.doc.id, u.query.bridge_entity) for u in level.units]
    assert asked == [("many", "SVM"), ("many", "random forest"), ("one", "SVM")]  # the best-scored two
    assert len(result.info.notes()) == 1
    note = result.info.notes()[0]
    assert "q4 was asked about at most 2 q1 answers per paper" in note and "--max-sub-questions" in note
    assert "many (2 not asked)" in note and "one" not in note.split(":", 1)[1]
    assert result.errors == {}


def test_a_ray_runs_chunks_give_one_note_on_the_capped_follow_ups() -> None:
    """Each chunk of a Ray run noted its own papers in a line of its own, so the run sheet of a 200-paper run held
    200 lines "q4 was asked about at most 3 q1 answers ... in 1 paper": the chunks' counts now add up to one."""
    from mlpsych.pipeline.result import RunInfo

    parts = [RunInfo(capped={"q4": {"cap": 3, "bridge_from": "q1", "papers": {paper: n}}}) for paper, n in
             (("a", 2), ("b", 1))] + [RunInfo(warnings=["normalization skipped: no GPU"])]
    gathered = RunInfo.gathered(parts)
    assert gathered.notes() == [
        "normalization skipped: no GPU",
        "q4 was asked about at most 3 q1 answers per paper, the best-scored (max_sub_questions in the question file, "
        "--max-sub-questions to change it); in 2 papers the other q1 answers were not asked about: a (2 not asked), b "
        "(1 not asked)"]
    assert gathered.to_dict()["warnings"] == gathered.notes() and "capped" not in gathered.to_dict()
    assert parts[0].capped["q4"]["papers"] == {"a": 2}  # the chunks' own records are left as they were
