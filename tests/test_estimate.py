"""The page's estimate from typed progress events: a fixed total, per-kind measured rates, honest 'unknown'."""

from __future__ import annotations

import pytest

from mlpsych.estimate import ProgressTracker, describe_stage, format_seconds, short_model
from mlpsych.pipeline import Pipeline
from mlpsych.progress import ProgressEvent
from mlpsych.questions import parse_question_set
from mlpsych.settings import LLMSettings, RunSettings

QS = parse_question_set({"questions": [
    {"id": "q1", "text": "Which methods?", "models": ["m1", "org/m2"],
     "normalize": {"prompt": "{answers}", "model": "L"}},
    {"id": "q2", "text": "Which software?", "models": ["m1"], "normalize": {"prompt": "{answers}", "model": "L"}},
    {"id": "q4", "text": "What was __PLACEHOLDER__ for?", "models": ["m1"], "bridge_from": "q1"},
]}, "inline")


def plan(llm: bool, n: int, tmp_path) -> list[ProgressEvent]:
    from mlpsych.cache import ResultCache

    return Pipeline(QS, RunSettings(llm=LLMSettings(enabled=llm)), ResultCache(tmp_path), progress=False).plan(n)


def test_the_pipeline_plans_every_stage_with_its_llm(tmp_path):
    stages = [(e.stage, e.questions, e.model, e.total, e.unit) for e in plan(True, 20, tmp_path)]
    assert stages == [("read", ("q1", "q2"), "m1", 20, "paper"), ("read", ("q1",), "org/m2", 20, "paper"),
                      ("normalize", ("q1", "q2"), "L", 3, "batch"),  # 40 answer lists in batches of 16
                      ("read", ("q4",), "m1", 20, "paper")]
    assert [e.stage for e in plan(False, 2, tmp_path)] == ["read", "read", "read"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ev(stage, questions, model, done, total, loading=False) -> ProgressEvent:
    return ProgressEvent(stage, questions, model, done, total, "batch" if stage == "normalize" else "paper", loading)


def test_total_is_fixed_and_the_llm_is_not_estimated_before_its_first_batch(tmp_path):
    clock = Clock()
    tracker = ProgressTracker(plan(True, 2, tmp_path), clock)
    assert tracker.total == 2 + 2 + 1 + 2 and tracker.seconds_left() is None
    totals = []
    for now, event in [(100, ev("read", ("q1", "q2"), "m1", 0, 2, loading=True)),
                       (110, ev("read", ("q1", "q2"), "m1", 1, 2)), (120, ev("read", ("q1", "q2"), "m1", 2, 2)),
                       (120, ev("read", ("q1", "q2"), "m1", 2, 2)),  # the stage's closing report, repeated
                       (125, ev("read", ("q1",), "org/m2", 1, 2)), (130, ev("read", ("q1",), "org/m2", 2, 2))]:
        clock.now = now
        tracker.update(event)
        totals.append(tracker.total)
    assert set(totals) == {7}  # the total does not jump
    assert tracker.done == 4 and tracker.seconds_per_unit("read") == pytest.approx(30 / 4)
    assert tracker.seconds_left() is None  # the LLM batch is not measured yet: no made-up number
    assert tracker.describe() == ("reading q1 with m2: paper 2 of 2 · time left: measured after the first "
                                  "LLM batch")
    tracker.update(ev("normalize", ("q1", "q2"), "L", 0, 1))  # the LLM stage starts
    assert tracker.describe().startswith("LLM L tidying q1,q2: batch 0 of 1 ·")
    clock.now = 190
    tracker.update(ev("normalize", ("q1", "q2"), "L", 1, 1))
    assert tracker.seconds_per_unit("normalize") == pytest.approx(60.0)
    assert tracker.seconds_left() == pytest.approx(2 * 30 / 4)  # q4's two papers at the measured reading rate
    assert tracker.fraction() == pytest.approx(5 / 7)
    tracker.update(ev("read", ("q4",), "m1", 1, 1))  # one paper had follow-ups: the stage shrinks
    assert tracker.total == 6 and tracker.fraction() == 0.99  # never full before the run has finished
    tracker.finish()
    assert tracker.fraction() == 1.0 and tracker.seconds_left() == 0.0


def test_stages_without_events_close_and_unplanned_ones_are_added(tmp_path):
    tracker = ProgressTracker(plan(True, 2, tmp_path), Clock())
    tracker.update(ev("read", ("q4",), "m1", 1, 2))  # everything before had nothing to do
    assert [(s.done, s.total) for s in tracker.stages] == [(0, 0), (0, 0), (0, 0), (1, 2)]
    tracker.update(ev("normalize", ("q4",), "L", 1, 1))
    assert tracker.stages[-1].event.key == ("normalize", ("q4",), "L") and tracker.total == 2


def test_describe_stage_and_formats():
    assert describe_stage(ev("read", ("q1",), "/tmp/tiny/deberta-v2/", 0, 3, loading=True), 0, 3) == (
        "loading deberta-v2 for q1")
    assert describe_stage(ev("read", ("q1", "q2"), "deepset/x", 1, 3), 1, 3) == "reading q1,q2 with x: paper 1 of 3"
    assert short_model("meta-llama/Meta-Llama-3-8B-Instruct") == "Meta-Llama-3-8B-Instruct"
    assert [format_seconds(s) for s in (0, 59.4, 61, 3600, 3725)] == [
        "0 s", "59 s", "1 min 01 s", "1 h 00 min", "1 h 02 min"]
