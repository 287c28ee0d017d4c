"""The cascade benchmark's unseen-software simulation: a paper's own tools leave the software signal, nothing else."""

from __future__ import annotations

from mlpsych.retrieval import Plan
from mlpsych.settings import RetrievalSettings
from tests.benchmarks.scripts import load_script

cascade_retrieval = load_script("cascade_retrieval")
MemoSelector, unseen_software = cascade_retrieval.MemoSelector, cascade_retrieval.unseen_software


def test_unseen_software_takes_the_gold_answers_names_their_aliases_and_own_keys_but_no_generic_word():
    answers = [{"text": "sklearn"}, {"text": "glmnet package"}, {"text": "statsmodel"}]
    unseen = unseen_software(answers)
    assert {"sklearn", "scikit learn", "glmnet", "statsmodel"} <= unseen
    assert not unseen & {"package", "software", "version"}
    assert unseen_software([]) == frozenset()


def test_a_selector_with_unseen_software_scores_windows_without_those_names_only():
    texts = ["We used scikit-learn in Python.", "The software package was implemented.", "Participants were 50."]
    plan = Plan(mode="bm25", budget=1, signals=("software",))
    seen = MemoSelector(RetrievalSettings(read="retrieve")).scores(plan, "q", texts, "software")
    unseen = MemoSelector(RetrievalSettings(read="retrieve"), exclude=unseen_software([{"text": "sklearn"}]))
    assert seen.tolist() == [2.0, 3.0, 0.0]
    assert unseen.scores(plan, "q", texts, "software").tolist() == [1.0, 3.0, 0.0]
