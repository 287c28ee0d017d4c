"""Retrieval before reading: BM25 window choice, budgets, entity-anchored windows, and the pipeline reading less."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mlpsych
from mlpsych.cache import ResultCache
from mlpsych.documents import Document
from mlpsych.pipeline import Pipeline
from mlpsych.questions import QuestionSet, RetrievalSpec
from mlpsych.reading.windows import Window
from mlpsych.retrieval import Plan, WindowSelector, bm25_scores, entity_windows, plan_for
from mlpsych.settings import LLMSettings, ReaderSettings, RetrievalSettings, RunSettings

PARAGRAPHS = [
    "Participants (N = 240) were undergraduate students who completed questionnaires about loneliness.",
    "Essays were preprocessed in Python; we trained the classifier with the scikit-learn software package.",
    "Loneliness correlated with age, r = .21, and with self-esteem, r = -.34, in the whole sample.",
    "Support vector machines (SVM) separated lonely from non-lonely writers with an accuracy of 71%.",
    "The SVMs were compared with random-forest models on a held-out test set of 60 students.",
    "Random forests ranked word categories by importance; social words mattered most.",
    "Limitations include the student sample and the single time point of the survey.",
]


def made_up_paper() -> tuple[Document, list[Window]]:
    """One window per paragraph (windows of a real reader come from its tokenizer; these are hand-cut)."""
    text, windows = "", []
    for i, paragraph in enumerate(PARAGRAPHS):
        start = len(text)
        text += paragraph + "\n\n"
        windows.append(Window(i, 0, 0, start, start + len(paragraph)))
    return Document(id="made-up", text=text), windows


def test_bm25_picks_the_window_with_the_answer():
    doc, windows = made_up_paper()
    chosen = WindowSelector().select(doc, windows, "What software was used to train the classifier?",
                                     Plan(mode="bm25", budget=1))
    assert chosen == (1,)


def test_bm25_scores_zero_for_a_question_of_stopwords_only():
    assert bm25_scores("What was it?", ["a text", "another text"]).tolist() == [0.0, 0.0]


def test_budget_is_respected_and_neighbours_are_added():
    doc, windows = made_up_paper()
    selector = WindowSelector()
    question = "Which machine learning models, such as support vector machines or random forests, were used?"
    two = selector.select(doc, windows, question, Plan(mode="bm25", budget=2))
    assert len(two) == 2 and set(two) <= {3, 4, 5}
    assert two == tuple(sorted(two))
    one = selector.select(doc, windows, question, Plan(mode="bm25", budget=1, neighbours=1))
    best = one[1]
    assert one == (best - 1, best, best + 1)
    assert selector.select(doc, windows, question, Plan(mode="bm25", budget=len(windows))) is None  # = read all


def test_entity_anchored_windows_follow_abbreviations_plurals_and_hyphens():
    doc, windows = made_up_paper()
    # "SVM" is defined as "Support vector machines (SVM)"; "SVMs" is its plural.
    assert entity_windows(doc, windows, "SVM") == [3, 4]
    assert entity_windows(doc, windows, "support vector machine") == [3, 4]
    # "random forest": "random-forest" (hyphen) and "Random forests" (case, plural).
    assert entity_windows(doc, windows, "random forest") == [4, 5]
    assert entity_windows(doc, windows, "neural network") == []


def test_sub_question_reads_only_windows_of_its_entity():
    doc, windows = made_up_paper()
    selector = WindowSelector()
    plan = Plan(mode="bm25", budget=3, entity_anchor=True)
    assert selector.select(doc, windows, "What was SVM used for?", plan, entity="SVM") == (3, 4)
    capped = Plan(mode="bm25", budget=3, entity_anchor=True, entity_budget=1)
    assert len(selector.select(doc, windows, "What was random forest used for?", capped, "random forest")) == 1
    # A budget larger than the paper still reads only the entity's windows.
    assert selector.select(doc, windows, "What was SVM used for?", Plan(mode="bm25", budget=50), "SVM") == (3, 4)
    # An entity the paper never mentions: scored over all windows, within the budget.
    unknown = selector.select(doc, windows, "What was XGBoost used for?", plan, entity="XGBoost")
    assert unknown is not None and len(unknown) == 3


def test_plan_follows_template_and_global_settings():
    spec = RetrievalSpec(mode="dense", budget=4)
    assert plan_for(None, RetrievalSettings()) is None  # no spec: the paper's full read
    assert plan_for(spec, RetrievalSettings(read="all")) is None
    assert plan_for(spec, RetrievalSettings()) == Plan(mode="dense", budget=4)
    assert plan_for(None, RetrievalSettings(read="retrieve")) == Plan(mode="bm25", budget=RetrievalSpec().budget)
    assert plan_for(spec, RetrievalSettings(read="retrieve", mode="bm25", budget=2)).budget == 2
    assert plan_for(spec, RetrievalSettings(read="retrieve", mode="bm25")).mode == "bm25"


# -- the pipeline --------------------------------------------------------------------------------------

PAPER = " ".join([
    "Participants (N = 312) completed an online survey about burnout and their working hours.",
    "Job demands, job resources and sleep quality were measured with validated scales.",
] * 14 + [
    "We used random forests (RF) to predict turnover intention from the survey items.",
    "Models were fitted with the scikit-learn software in Python.",
] + [
    "Burnout was higher among nurses than among teachers, and sleep quality was lower.",
] * 14)


def _questions(model: str, retrieval: RetrievalSpec | None) -> QuestionSet:
    return QuestionSet.model_validate({"name": "t", "questions": [
        {"id": "q1", "text": "What machine learning techniques were used?", "models": [model], "top_k": 5,
         "retrieval": retrieval.model_dump() if retrieval else None},
        {"id": "q4", "text": "What was __PLACEHOLDER__ used for?", "models": [model], "bridge_from": "q1",
         "kind": "phrase", "top_k": 3, "retrieval": retrieval.model_dump() if retrieval else None},
    ]})


def _settings(read: str = "template") -> RunSettings:
    return RunSettings(reader=ReaderSettings(max_length=96, stride=24, question_tokens=24, batch_size=8),
                       llm=LLMSettings(enabled=False), retrieval=RetrievalSettings(read=read), max_sub_questions=3)


@pytest.mark.slow
def test_pipeline_with_retrieval_reads_fewer_windows_and_rerun_loads_nothing(tiny_models, tmp_path):
    model = str(tiny_models["deberta-v2"])
    docs = [Document(id="p", text=PAPER)]
    full = Pipeline(_questions(model, None), _settings(), ResultCache(tmp_path / "full"), progress=False)
    full.run(docs)
    picked = Pipeline(_questions(model, RetrievalSpec(mode="bm25", budget=2)), _settings(),
                      ResultCache(tmp_path / "picked"), progress=False)
    first = picked.run(docs)
    assert 0 < picked.windows_read < full.windows_read / 3
    again = Pipeline(_questions(model, RetrievalSpec(mode="bm25", budget=2)), _settings(),
                     ResultCache(tmp_path / "picked"), progress=False)
    second = again.run(docs)
    assert again.windows_read == 0 and again.model_loads == []
    assert [a.to_dict() for a in second.answers] == [a.to_dict() for a in first.answers]


@pytest.mark.slow
def test_papers_with_few_windows_to_read_are_read_together_with_the_same_answers(tiny_models, tmp_path, monkeypatch):
    from mlpsych.reading.reader import Reader

    model = str(tiny_models["deberta-v2"])
    docs = [Document(id=f"p{i}", text=PAPER.replace("students", f"students of cohort {i}")) for i in range(5)]
    questions = _questions(model, RetrievalSpec(mode="bm25", budget=2))
    alone = [Pipeline(questions, _settings(), ResultCache(tmp_path / f"alone{i}"), progress=False).run([d])
             for i, d in enumerate(docs)]
    groups: list[int] = []
    run_many = Reader.run_many
    monkeypatch.setattr(Reader, "run_many", lambda self, papers: (groups.append(len(papers)), run_many(self, papers))[1])
    together = Pipeline(questions, _settings(), ResultCache(tmp_path / "together"), progress=False).run(docs)
    assert groups and max(groups) == 5  # 2 windows each: all five papers share batches
    expected = [a.to_dict() for result in alone for a in result.answers]
    assert sorted(map(str, expected)) == sorted(map(str, (a.to_dict() for a in together.answers)))


@pytest.mark.slow
def test_read_all_reproduces_the_full_read_exactly(tiny_models, tmp_path):
    model = str(tiny_models["deberta-v2"])
    docs = [Document(id="p", text=PAPER)]
    paper = Pipeline(_questions(model, None), _settings(), ResultCache(tmp_path / "a"), progress=False)
    expected = paper.run(docs)
    forced = Pipeline(_questions(model, RetrievalSpec(mode="bm25", budget=1)), _settings(read="all"),
                      ResultCache(tmp_path / "b"), progress=False)
    got = forced.run(docs)
    assert forced.windows_read == paper.windows_read
    assert [a.to_dict() for a in got.answers] == [a.to_dict() for a in expected.answers]


def test_retrieval_terms_steer_a_vague_question():
    doc, windows = made_up_paper()
    selector = WindowSelector()
    vague = "What was used?"  # nothing but question words: every window scores 0, the first one wins
    assert selector.select(doc, windows, vague, Plan(mode="bm25", budget=1)) == (0,)
    steered = Plan(mode="bm25", budget=1, terms="software package library")
    assert selector.select(doc, windows, vague, steered) == (1,)


# -- pattern signals beside BM25 -----------------------------------------------------------------------

from mlpsych.questions import load_question_set  # noqa: E402
from mlpsych.retrieval.signals import (  # noqa: E402
    diverse_order,
    reciprocal_rank_fusion,
    signal_scores,
    software_names,
    window_terms,
)
from mlpsych.settings import PRESETS  # noqa: E402


def test_methods_signal_counts_distinct_methods_and_definitions_and_discounts_generic_words():
    terms = window_terms("methods", "We used random forests (RF), a Random-Forest again, and lasso; accuracy was high.")
    # "random forests" and "Random-Forest" are one method; "RF" is defined; "accuracy" is a generic word (0.3).
    assert terms == {"random forest": 1.0, "defines:RF": 1.0, "lasso": 1.0, "accuracy": 0.3}
    assert signal_scores("methods", ["Participants completed a survey.", "We used lasso."]).tolist() == [0.0, 1.0]


def test_software_signal_finds_names_packages_versions_and_not_a_lowercase_r():
    terms = window_terms("software", "Analyses were run in R (version 4.0.2) with the glmnet package; r = .32.")
    assert terms == {"r": 1.0, "version": 1.0, "version:version 4.0.2": 1.0, "glmnet": 1.0, "package": 1.0}
    assert window_terms("software", "The correlation was r = .32 in the sample.") == {}


def test_software_signal_excludes_a_tool_in_every_spelling_and_keeps_the_rest():
    text = "Models were fitted with TensorFlow and tensorflow (version 2.4.3) in Python; the glmnet package in R."
    assert software_names(text) == {"tensorflow", "python", "glmnet", "r"}  # names only: not "package" or "version"
    kept = window_terms("software", text, exclude=frozenset({"tensorflow", "glmnet"}))
    assert kept == {"version": 1.0, "version:version 2.4.3": 1.0, "python": 1.0, "package": 1.0, "r": 1.0}
    assert window_terms("software", text)["glmnet"] == 1.0  # the default vocabulary is untouched
    assert signal_scores("software", [text], exclude=frozenset({"tensorflow", "glmnet"})).tolist() == [5.0]


def test_aims_purpose_and_early_signals():
    texts = ["We aimed to examine whether loneliness predicts burnout.", "Results are in Table 2.",
             "Random forests were used to predict burnout."]
    # "aimed", "to examine", "whether"; "to predict" in the third
    assert signal_scores("aims", texts).tolist() == [3.0, 0.0, 1.0]
    assert signal_scores("purpose", texts).tolist() == [1.0, 0.0, 1.0]  # "aimed"; "used ... to"
    assert signal_scores("early", texts).tolist() == [0.0, -1.0, -2.0]
    with pytest.raises(ValueError, match="unknown retrieval signal 'colour'"):
        signal_scores("colour", texts)


def test_reciprocal_rank_fusion_by_hand():
    # list 1 ranks 0, 2, 1; list 2 ranks 1, then the tie 0 before 2. k = 10:
    # 0: 1/11 + 1/12 = .1742; 1: 1/13 + 1/11 = .1678; 2: 1/12 + 1/13 = .1603.
    fused = reciprocal_rank_fusion([[3.0, 1.0, 2.0], [0.0, 5.0, 0.0]])
    assert fused == pytest.approx([1 / 11 + 1 / 12, 1 / 13 + 1 / 11, 1 / 12 + 1 / 13])
    # shared ties: 0 and 2 both take rank 2 in list 2
    shared = reciprocal_rank_fusion([[3.0, 1.0, 2.0], [0.0, 5.0, 0.0]], shared_ties=True)
    assert shared == pytest.approx([1 / 11 + 1 / 12, 1 / 13 + 1 / 11, 1 / 12 + 1 / 12])


def test_diverse_order_prefers_windows_that_add_new_terms():
    order = diverse_order([5.0, 4.0, 1.0], [{"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 1.0}, {"c": 1.0}])
    assert order == [0, 2, 1]  # window 1 repeats window 0's terms; window 2 adds "c"


def test_selector_uses_template_signals_and_diversity():
    doc, windows = made_up_paper()
    selector = WindowSelector()
    vague = "What was used?"
    assert selector.select(doc, windows, vague, Plan(mode="bm25", budget=1, signals=("software",))) == (1,)
    # methods: window 3 = SVM, support vector machine, defines SVM, accuracy (3.3); 4 = SVM, random forest,
    # test set (2.3); 5 = random forest (1.0); 1 = trained, classifier (0.6).
    top = Plan(mode="bm25", budget=3, signals=("methods",))
    assert selector.select(doc, windows, vague, top) == (3, 4, 5)
    # Diverse: after 3 and 4, window 5 adds nothing new, window 1 adds "trained" and "classifier".
    assert selector.select(doc, windows, vague, Plan(mode="bm25", budget=3, signals=("methods",), diverse=True)) == (1, 3, 4)


def test_sub_question_reads_its_entity_windows_plus_the_best_of_the_paper():
    doc, windows = made_up_paper()
    plan = Plan(mode="bm25", budget=1, entity_budget=2, entity_extra=1, signals=("software",))
    # "random forest" is in windows 4 and 5; the paper's best window by the software signal is 1.
    assert WindowSelector().select(doc, windows, "What was random forest used for?", plan, "random forest") == (1, 4, 5)


def test_template_retrieval_blocks_do_not_change_the_faithful_default():
    questions = load_question_set("mlpsych")
    assert all(q.retrieval is not None for q in questions.questions)
    for q in questions.questions:  # read every window unless retrieval is asked for
        assert plan_for(q.retrieval, RetrievalSettings()) is None
        assert plan_for(q.retrieval, PRESETS["paper"].retrieval) is None
    q1 = plan_for(questions.get("q1").retrieval, PRESETS["fast"].retrieval)
    assert (q1.unit, q1.budget, q1.signals) == ("sentence", 5, ("methods",))
    assert q1.cascade == PRESETS["fast"].retrieval.cascade  # the fast preset's cascade ranks with these signals
    q4 = plan_for(questions.get("q4").retrieval, PRESETS["fast"].retrieval)
    assert (q4.unit, q4.signals) == ("window", ("question", "purpose"))
    assert questions.get("q4").retrieval.also_ask == ["machine learning"]
    spec = RetrievalSpec(mode="bm25", budget=2, query="software package", signals=["question", "software"])
    assert plan_for(spec, RetrievalSettings()) == Plan(mode="bm25", budget=2, terms="software package",
                                                       signals=("question", "software"))


def test_a_share_of_the_paper_is_read_between_the_budget_and_its_cap():
    plan = Plan(mode="bm25", budget=2, share=0.25, max_budget=4)
    assert [plan.windows_for(n) for n in (3, 8, 9, 12, 16, 40)] == [2, 2, 3, 3, 4, 4]
    assert Plan(mode="bm25", budget=2).windows_for(40) == 2
    doc, windows = made_up_paper()  # 7 windows
    half = Plan(mode="bm25", budget=2, share=0.5, max_budget=5)
    assert len(WindowSelector().select(doc, windows, "What methods were used?", half)) == 4
    # A run-wide budget overrides the template's share.
    spec = RetrievalSpec(mode="bm25", budget=2, share=0.25, max_budget=4)
    assert plan_for(spec, RetrievalSettings(read="retrieve", budget=5)).windows_for(40) == 5
    with pytest.raises(ValueError, match="max_budget"):
        RetrievalSpec(budget=5, max_budget=3)


def _sentence_packer(doc: Document, capacity_chars: int):
    """Stands in for a reader's packing: passages fill windows of ``capacity_chars`` characters, in order."""
    def pack(passages):
        windows, used = [], capacity_chars
        for a, b in sorted(passages):
            if used + b - a > capacity_chars:
                windows.append([])
                used = 0
            windows[-1].append((a, b))
            used += b - a
        return windows
    return pack


def test_sentences_are_chosen_by_their_signals_within_the_budget():
    doc, windows = made_up_paper()
    plan = Plan(mode="bm25", budget=1, signals=("methods",), unit="sentence")
    selector = WindowSelector()
    text = doc.text
    # One window of 200 characters holds two sentences: the two naming most methods (SVM: 3.3, SVMs + random
    # forest + test set: 2.3), not the one saying "we trained" (0.6 methods).
    chosen = selector.select_sentences(doc, "What methods were used?", plan, _sentence_packer(doc, 200), len(windows))
    assert [text[a:b] for a, b in chosen] == [PARAGRAPHS[3], PARAGRAPHS[4]]
    # Two windows: every sentence with a signal, in paper order; those without one (0, 2, 6) are never read.
    chosen = selector.select_sentences(doc, "What methods were used?", Plan(**{**plan.__dict__, "budget": 2}),
                                       _sentence_packer(doc, 200), len(windows))
    assert [text[a:b] for a, b in chosen] == [PARAGRAPHS[1], PARAGRAPHS[3], PARAGRAPHS[4], PARAGRAPHS[5]]
    # Sentences that would fill as many windows as the paper has are not worth packing: the paper is read (None).
    assert selector.select_sentences(doc, "What methods were used?", Plan(**{**plan.__dict__, "budget": 7}),
                                     _sentence_packer(doc, 10), n_windows=4) is None


def test_pipeline_reads_packed_sentences_and_asks_the_general_sub_question(tiny_models, tmp_path):
    from mlpsych.documents import sentence_spans

    model = str(tiny_models["bert"])
    filler = " ".join(f"Paragraph {i} describes the sample and its recruitment in detail." for i in range(60))
    text = (f"{filler} We trained random forests and support vector machines (SVM) on the essays. {filler} "
            f"Machine learning was used to predict loneliness from text. {filler}")
    doc = Document(id="p", text=text)
    questions = QuestionSet.model_validate({"name": "t", "questions": [
        {"id": "q1", "text": "What machine learning techniques were used?", "models": [model], "top_k": 3,
         "retrieval": {"mode": "bm25", "unit": "sentence", "budget": 1, "signals": ["methods"]}},
        {"id": "q4", "text": "What was __PLACEHOLDER__ used for?", "models": [model], "bridge_from": "q1",
         "top_k": 2, "max_sub_questions": 2,
         "retrieval": {"mode": "bm25", "budget": 1, "also_ask": ["machine learning"]}}]})
    reader = ReaderSettings(max_length=64, stride=16, question_tokens=16)
    settings = RunSettings(reader=reader, llm=LLMSettings(enabled=False),
                           retrieval=RetrievalSettings(read="retrieve", entity_budget=1))
    pipe = Pipeline(questions, settings, cache=ResultCache(tmp_path / "c"), progress=False)
    result = pipe.run([doc])
    q1 = [a for a in result.answers if a.question_id == "q1" and a.stage == "extractive"]
    method_sentences = [(a, b) for a, b in sentence_spans(text) if "random forests" in text[a:b]
                        or "Machine learning" in text[a:b]]
    for answer in q1:  # q1 read only the sentences with a signal, so its answers come from them
        assert all(any(a <= s.start and s.end <= b for a, b in method_sentences) for s in answer.spans)
    entities = {a.bridge_entity for a in result.answers if a.question_id == "q4"}
    assert "machine learning" in entities  # asked besides q1's answers, because retrieval is on
    full = Pipeline(questions, settings.model_copy(update={"retrieval": RetrievalSettings(read="all")}),
                    cache=ResultCache(tmp_path / "full"), progress=False)
    full_result = full.run([doc])
    assert "machine learning" not in {a.bridge_entity for a in full_result.answers if a.question_id == "q4"} or \
        any(a.text.casefold() == "machine learning" for a in full_result.answers if a.question_id == "q1")
    assert pipe.windows_read < full.windows_read
    again = Pipeline(questions, settings, cache=ResultCache(tmp_path / "c"), progress=False)
    again.run([doc])
    assert again.windows_read == 0  # the packed reads were cached under their passages


def test_bm25_scoring_leaves_jax_alone(tmp_path):
    """bm25s's import runs a JAX top-k where JAX is installed, and on a GPU JAX then takes 75% of the GPU's memory
    (seen on the device machine). A stand-in JAX package that marks its import shows whether it was touched."""
    package = tmp_path / "site" / "jax"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import os\nopen(os.environ['JAX_MARKER'], 'a').write('imported\\n')\n")
    (package / "lax.py").write_text("def top_k(scores, k):\n    return scores[:k], list(range(k))\n")
    marker = tmp_path / "jax-imported"
    path = [str(tmp_path / "site"), str(Path(mlpsych.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "JAX_MARKER": str(marker), "PYTHONPATH": os.pathsep.join(path)}

    def python(code: str) -> None:
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)

    python("import bm25s")
    assert marker.read_text() == "imported\n"  # the stand-in is what bm25s imports
    marker.unlink()
    python("import sys\n"
           "from mlpsych.retrieval.ranking import bm25_scores\n"
           "scores = bm25_scores('random forest', ['we used a random forest', 'an unrelated text'])\n"
           "assert scores[0] > scores[1] == 0, scores\n"
           "assert 'jax' not in sys.modules\n"
           "import jax\n")  # and the process can still import JAX itself afterwards
    assert marker.read_text() == "imported\n"
