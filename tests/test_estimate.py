"""The page's estimate from typed progress events: a fixed total, per-kind measured rates, honest 'unknown'."""

from __future__ import annotations

import pytest

from mlpsych.cache import ResultCache
from mlpsych.estimate import ProgressTracker, describe_stage, format_seconds, short_model
from mlpsych.pipeline import Pipeline, Settled
from mlpsych.progress import ProgressEvent
from mlpsych.questions import load_question_set, parse_question_set
from mlpsych.settings import LLMSettings, RunSettings

QS = parse_question_set({"questions": [
    {"id": "q1", "text": "Which methods?", "models": ["m1", "org/m2"],
     "normalize": {"prompt": "{answers}", "model": "L"}},
    {"id": "q2", "text": "Which software?", "models": ["m1"], "normalize": {"prompt": "{answers}", "model": "L"}},
    {"id": "q4", "text": "What was __PLACEHOLDER__ for?", "models": ["m1"], "bridge_from": "q1"},
]}, "inline")


def plan(llm: bool, n: int, tmp_path) -> list[ProgressEvent]:
    return Pipeline(QS, RunSettings(llm=LLMSettings(enabled=llm)), ResultCache(tmp_path), progress=False).plan(n)


def test_the_pipeline_plans_every_stage_with_its_llm(tmp_path):
    stages = [(e.stage, e.questions, e.model, e.total, e.unit, e.counted) for e in plan(True, 20, tmp_path)]
    assert stages == [("read", ("q1", "q2"), "m1", 20, "paper", True), ("read", ("q1",), "org/m2", 20, "paper", True),
                      ("normalize", ("q1", "q2"), "L", 3, "batch", True),  # 40 answer lists in batches of 16
                      ("read", ("q4",), "m1", 0, "sub-question", False)]  # counted once q1 is answered
    assert [e.stage for e in plan(False, 2, tmp_path)] == ["read", "read", "read"]


def test_the_plan_leaves_out_the_pairs_a_kept_coding_settles(tmp_path):
    """``run --keep-coding`` asks no coded (paper, question) pair: its plan (the progress line's totals) counted every
    paper for every question, so a rerun after a question was added looked as long as the first run. A paper counts
    for a reader while it asks that reader any question; a question's answer lists, where it is asked."""
    pipeline = Pipeline(QS, RunSettings(llm=LLMSettings(enabled=True)), ResultCache(tmp_path), progress=False)
    settled = Settled({"A": ["q1", "q2"], "B": ["q1"]})  # A: every question of the first level coded; B: q1
    stages = [(e.stage, e.questions, e.model, e.total, e.counted) for e in pipeline.plan(["A", "B", "C"], settled)]
    assert stages == [("read", ("q1", "q2"), "m1", 2, True), ("read", ("q1",), "org/m2", 1, True),
                      ("normalize", ("q1", "q2"), "L", 1, True),  # 3 answer lists: C's q1, B's and C's q2
                      ("read", ("q4",), "m1", 0, False)]
    assert pipeline.plan(["A", "B", "C"]) == pipeline.plan(3)  # nothing settled: every paper and question


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ev(stage, questions, model, done, total, loading=False) -> ProgressEvent:
    return ProgressEvent(stage, questions, model, done, total, "batch" if stage == "normalize" else "paper", loading)


def sizing(questions, model, total) -> ProgressEvent:
    return ProgressEvent("read", questions, model, 0, total, "sub-question", sizing=True)


def test_the_llm_is_not_estimated_before_its_first_batch_nor_the_follow_ups_before_they_are_counted(tmp_path):
    clock = Clock()
    tracker = ProgressTracker(plan(True, 2, tmp_path), clock)
    assert tracker.seconds_left() is None
    for now, event in [(100, ev("read", ("q1", "q2"), "m1", 0, 2, loading=True)),
                       (110, ev("read", ("q1", "q2"), "m1", 1, 2)), (120, ev("read", ("q1", "q2"), "m1", 2, 2)),
                       (120, ev("read", ("q1", "q2"), "m1", 2, 2)),  # the stage's closing report, repeated
                       (125, ev("read", ("q1",), "org/m2", 1, 2)), (130, ev("read", ("q1",), "org/m2", 2, 2))]:
        clock.now = now
        tracker.update(event)
    assert tracker.seconds_left() is None  # q4's sub-questions are not known yet: no made-up number
    assert tracker.describe() == ("answering q1: paper 2 of 2 · estimating the time left until q4's follow-ups "
                                  "are counted · 30 s so far")
    tracker.update(ev("normalize", ("q1", "q2"), "L", 0, 1))  # the LLM stage starts
    assert tracker.describe().startswith("LLM L tidying q1, q2: batch 0 of 1 ·")
    clock.now = 190
    tracker.update(ev("normalize", ("q1", "q2"), "L", 1, 1))
    tracker.update(sizing(("q4",), "m1", 6))  # q1's answers give 6 sub-questions in the 2 papers
    assert tracker.total == 2 + 2 + 1 + 6
    # m1 read 2 papers x 2 questions in 20 s: 5 s per read, for each of the 6 sub-questions
    assert tracker.seconds_left() == pytest.approx(30.0)
    assert tracker.describe() == "LLM L tidying q1, q2: batch 1 of 1 · about 30 s left · 1 min 30 s so far"
    clock.now = 200
    tracker.update(ev("read", ("q4",), "m1", 4, 4))  # two sub-questions failed with their paper: the stage shrinks
    assert tracker.seconds_left() == 0.0 and tracker.describe().endswith("finishing · 1 min 40 s so far")
    assert tracker.fraction() == 0.99  # never full before the run has finished
    tracker.finish()
    assert tracker.fraction() == 1.0 and tracker.seconds_left() == 0.0


def test_without_a_follow_up_level_the_llm_waits_for_its_first_batch(tmp_path):
    clock = Clock()
    tracker = ProgressTracker(plan(True, 2, tmp_path)[:3], clock)
    for now, event in [(100, ev("read", ("q1", "q2"), "m1", 0, 2, loading=True)),
                       (120, ev("read", ("q1", "q2"), "m1", 2, 2)), (130, ev("read", ("q1",), "org/m2", 2, 2))]:
        clock.now = now
        tracker.update(event)
    assert tracker.seconds_left() is None
    assert tracker.describe() == ("answering q1: paper 2 of 2 · time left: measured after the first LLM batch · "
                                  "30 s so far")


# A demo run as the issue describes it (4 example papers, the tiny models, preset paper, no LLM), recorded from the
# pipeline's events: seconds since the run started, then the event. The follow-up level (q4) is three quarters of
# the run's time, and its 48 sub-questions are known only once q1 is answered.
D, A, E, R = "/tiny/deberta-v2", "/tiny/albert", "/tiny/electra", "/tiny/roberta"
Q13, Q2, Q4 = ("q1", "q3"), ("q2",), ("q4",)
RECORDED = [
    (7.4, ev("read", Q13, D, 0, 4, loading=True)), (33.1, ev("read", Q13, D, 2, 4)), (46.9, ev("read", Q13, D, 4, 4)),
    (47.8, ev("read", Q13, A, 0, 4, loading=True)), (58.1, ev("read", Q13, A, 2, 4)), (62.3, ev("read", Q13, A, 4, 4)),
    (62.9, ev("read", Q2, E, 0, 4, loading=True)), (67.3, ev("read", Q2, E, 3, 4)), (69.2, ev("read", Q2, E, 4, 4)),
    (69.9, ev("read", Q2, R, 0, 4, loading=True)), (73.5, ev("read", Q2, R, 3, 4)), (74.3, ev("read", Q2, R, 4, 4)),
    (75.2, sizing(Q4, D, 48)),
    (75.2, ProgressEvent("read", Q4, D, 0, 48, "sub-question", loading=True)),
    (88.3, ProgressEvent("read", Q4, D, 6, 48, "sub-question")),
    (112.9, ProgressEvent("read", Q4, D, 15, 48, "sub-question")),
    (134.9, ProgressEvent("read", Q4, D, 34, 48, "sub-question")),
    (150.9, ProgressEvent("read", Q4, D, 48, 48, "sub-question")),
]
END = 150.9


def test_a_recorded_run_never_shows_a_number_known_to_be_wrong(tmp_path):
    questions = load_question_set("mlpsych")
    models = {"deepset/deberta-v3-large-squad2": D, "ahotrod/albert_xxlargev1_squad2_512": A,
              "ahotrod/electra_large_discriminator_squad2_512": E, "deepset/roberta-large-squad2": R}
    tiny = questions.model_copy(update={"questions": [
        q.model_copy(update={"models": [models[m] for m in q.models]}) for q in questions.questions]})
    clock = Clock()
    clock.now = 0.0
    pipeline = Pipeline(tiny, RunSettings(llm=LLMSettings(enabled=False)), ResultCache(tmp_path), progress=False)
    tracker = ProgressTracker(pipeline.plan(4), clock)
    bars = []  # (seconds, the bar's fraction)
    for now, event in RECORDED:
        # between events too (a page or terminal refreshed every second): the line at every second up to this event
        while clock.now + 1 < now:
            clock.now += 1
            bars.append((clock.now, check(tracker, clock.now)))
        clock.now = now
        tracker.update(event)
        bars.append((now, check(tracker, now)))
    assert [b for _, b in bars] == sorted(b for _, b in bars)  # the bar never moves back
    assert max(b for now, b in bars if now < 0.5 * END) <= 0.5  # not at 80% after a fifth of the run, as it was


def check(tracker: ProgressTracker, now: float) -> float:
    """What the line may say at ``now`` of the recorded run: 'estimating' until q4 is counted, then a time left
    not below half of the true one, never '0 s left' while work remains; a bar not far ahead of the time."""
    line = tracker.describe()
    counted = now >= 75.2
    left = tracker.seconds_left()
    if not counted:
        assert left is None and "estimating the time left" in line, (now, line)
    elif now < END:
        assert left is not None and left >= 0.5 * (END - now), (now, left, line)
        assert "about 0 s left" not in line, (now, line)
    bar = tracker.fraction()
    assert bar <= max(0.5, 1.5 * now / END), (now, bar)
    return bar


def test_the_running_stage_counts_down_between_events_and_holds_at_half():
    clock = Clock()
    tracker = ProgressTracker([ev("read", ("q1",), "m", 0, 4)], clock)
    tracker.update(ev("read", ("q1",), "m", 0, 4, loading=True))
    clock.now = 110
    tracker.update(ev("read", ("q1",), "m", 1, 4))  # 10 s per paper: 30 s left
    lefts = []
    for now in (110, 115, 125, 200):
        clock.now = now
        lefts.append(tracker.seconds_left())
    assert lefts == [30, 25, 15, 15]  # the clock moves the estimate down, never below half of it (it is late)
    assert tracker.describe() == "answering q1: paper 1 of 4 · about 15 s left · 1 min 40 s so far"


def test_time_in_stages_that_report_nothing_is_not_the_next_stages_work():
    """A cached rerun of a thousand papers: q1 read from the cache in 10 s, then a minute in stages without events
    (merging, the confidence stage, the follow-up questions), then 3,000 cached sub-questions in 6 s. That minute
    was charged to q4's first sub-question: '9 h 45 min left' with seconds to go."""
    clock = Clock()
    q4 = ProgressEvent("read", ("q4",), "m1", 0, 0, "sub-question", counted=False)
    tracker = ProgressTracker([ev("read", ("q1",), "m1", 0, 1000), q4], clock)
    for done in (1, 500, 1000):
        clock.now += 5
        tracker.update(ev("read", ("q1",), "m1", done, 1000))
    clock.now += 60
    tracker.update(sizing(("q4",), "m1", 3000))
    clock.now += 0.5
    tracker.update(ProgressEvent("read", ("q4",), "m1", 1, 3000, "sub-question"))
    assert 3 <= tracker.seconds_left() < 60, tracker.describe()  # q1's rate until q4's own is measured
    clock.now += 3
    tracker.update(ProgressEvent("read", ("q4",), "m1", 1500, 3000, "sub-question"))
    assert tracker.seconds_left() == pytest.approx(3, abs=0.5)


def test_stages_without_events_close_and_unplanned_ones_are_added(tmp_path):
    tracker = ProgressTracker(plan(True, 2, tmp_path), Clock())
    tracker.update(ev("read", ("q4",), "m1", 1, 2))  # everything before had nothing to do
    assert [(s.done, s.total) for s in tracker.stages] == [(0, 0), (0, 0), (0, 0), (1, 2)]
    tracker.update(ev("normalize", ("q4",), "L", 1, 1))
    assert tracker.stages[-1].event.key == ("normalize", ("q4",), "L") and tracker.total == 2


def test_describe_stage_and_formats():
    assert describe_stage(ev("read", ("q1",), "/tmp/tiny/deberta-v2/", 0, 3, loading=True), 0, 3) == (
        "loading the reader for q1")
    assert describe_stage(ev("read", ("q1", "q2"), "deepset/x", 1, 3), 1, 3, {"q1": "methods"}) == (
        "answering q1 (methods), q2: paper 1 of 3")
    assert describe_stage(ev("normalize", ("q1",), "org/L", 1, 3), 1, 3) == "LLM L tidying q1: batch 1 of 3"
    assert short_model("meta-llama/Meta-Llama-3-8B-Instruct") == "Meta-Llama-3-8B-Instruct"
    assert [format_seconds(s) for s in (0, 59.4, 61, 3600, 3725)] == [
        "0 s", "59 s", "1 min 01 s", "1 h 00 min", "1 h 02 min"]
