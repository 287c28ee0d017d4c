"""The run's progress bar and time estimate, built from the pipeline's typed progress events (app and command line).

The plan (``Pipeline.plan``) fixes every stage before the first event. A first level's stages have their units
from the start; a follow-up level's sub-questions exist only once the level it bridges from is answered, so its
stages are *uncounted* until the pipeline's sizing events arrive, and the time left says "estimating" until then
instead of a number known to be too small. Time is measured in reads (one question read in one paper; a paper
read for two questions is two) per kind of stage and model, and in batches for the LLM: a stage not started yet
is estimated at its model's measured rate (else its kind's), its own rate once it has finished a unit; the running
stage counts down between events, never below half of what was expected at its last event. The time between one
stage's end and the next one's first event went to stages that report nothing (merging, confidence): no stage's
rate has it. The bar is
time done over time done plus time left once that is known; before, it is counted work, with an uncounted
follow-up level given as much room as the work before it. It never moves back and is full only when the run is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mlpsych.progress import ProgressEvent

# What a unit of each kind of stage is, for "measured after the first ..." while no rate exists.
STAGE_NAMES = {"read": "paper", "select": "paper read by the small reader", "normalize": "LLM batch"}


@dataclass
class StageProgress:
    """One stage of the run as the estimate sees it: units done of units to do, and seconds spent on it."""

    event: ProgressEvent  # the latest event of the stage (or its plan entry)
    total: int
    done: float = 0  # a long paper being read counts in part
    seconds: float = 0.0
    counted: bool = True  # False while a follow-up level's sub-questions are not known

    @property
    def left(self) -> int:
        return max(0, self.total - self.done)

    @property
    def work_per_unit(self) -> int:
        """Reads per unit: a paper read for k questions is k reads; a sub-question or an LLM batch is one."""
        return len(self.event.questions) if self.event.unit == "paper" else 1

    @property
    def kind(self) -> tuple[str, str]:
        return self.event.stage, self.event.model


class ProgressTracker:
    """Subscribes to ``ProgressEvent``s (pass :meth:`update` as the pipeline's ``on_progress``).

    ``labels`` (question id -> short text) let :meth:`describe` name the questions rather than only their ids.
    """

    def __init__(self, plan: list[ProgressEvent], clock: Callable[[], float] = time.monotonic,
                 labels: dict[str, str] | None = None) -> None:
        self.stages = [StageProgress(event, event.total, counted=event.counted) for event in plan]
        self.clock = clock
        self.labels = labels or {}
        self.started = self.last = clock()
        self.active: int | None = None
        self.finished = False
        self._shown = 0.0  # the bar's last fraction: it never moves back

    def update(self, event: ProgressEvent) -> None:
        if event.sizing:  # a follow-up stage's units are now known; no work started
            stage = self.stages[self._find(event)]
            stage.total, stage.counted = event.total, True
            return
        now = self.clock()
        index = self._find(event)
        running = self.current()
        if running is not None and running.left:  # the time since the last event went to the stage then running;
            running.seconds += now - self.last  # after it finished, to stages that report nothing (merging, the
            # confidence stage, building follow-up questions): charged to this stage's first unit, a cached stage's
            # first sub-question took the minute a thousand papers' confidence took, times 1,023 (9 h 45 min left)
        self.last = now
        for earlier in self.stages[:index]:  # stages passed over had no (more) work
            earlier.total, earlier.counted = earlier.done, True
        self.active = index
        stage = self.stages[index]
        stage.event = event
        stage.total, stage.counted = event.total, True
        stage.done = max(stage.done, min(event.done, event.total))

    def _find(self, event: ProgressEvent) -> int:
        """The stage with this event's key (keys are unique in a run: each level asks other questions); a stage the
        plan lacked is added."""
        for i, stage in enumerate(self.stages):
            if stage.event.key == event.key:
                return i
        self.stages.append(StageProgress(event, event.total))
        return len(self.stages) - 1

    def finish(self) -> None:
        self.finished = True

    @property
    def done(self) -> int:
        return sum(s.done for s in self.stages)

    @property
    def total(self) -> int:
        return sum(s.total for s in self.stages)

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    def _rate(self, stages: list[StageProgress]) -> float | None:
        """Seconds per read (or LLM batch) over the finished units of these stages (the time up to their last
        event); None before the first."""
        measured = [s for s in stages if s.done]
        work = sum(s.done * s.work_per_unit for s in measured)
        return sum(s.seconds for s in measured) / work if work else None

    def seconds_per_unit(self, stage: StageProgress) -> float | None:
        """Expected seconds per read (or batch) of a stage: its own measure once it has finished a unit in measured
        time (a first unit reported with the stage's first event has none), else its model's in earlier stages of the
        same kind, else its kind's; None when nothing of its kind is measured."""
        if stage.done and stage.seconds:
            return self._rate([stage])
        same_model = [s for s in self.stages if s.kind == stage.kind and s.done]
        return self._rate(same_model) or self._rate([s for s in self.stages if s.event.stage == stage.event.stage])

    def _uncounted(self) -> list[StageProgress]:
        return [s for s in self.stages if not s.counted]

    def seconds_left(self) -> float | None:
        """Work left times its expected seconds per unit; None while a follow-up level is uncounted or some kind
        of stage with work left is not measured yet."""
        if self.finished:
            return 0.0
        if self._uncounted():
            return None
        left = 0.0
        for stage in self.stages:
            if stage.left:
                rate = self.seconds_per_unit(stage)
                if rate is None:
                    return None
                expected = rate * stage.left * stage.work_per_unit
                if stage is self.current():  # counts down between events, to half of what was expected at most
                    running = self.clock() - self.last + (0.0 if stage.done else stage.seconds)
                    expected = max(expected - running, expected / 2)
                left += expected
        return left

    def fraction(self) -> float:
        """How far the run is, for the bar: time-based once the time left is known, counted work before (an
        uncounted follow-up level weighing as much as the work before it); never back, never full before the end."""
        if self.finished:
            return 1.0
        left = self.seconds_left()
        if left is not None:
            spent = self.elapsed
            now = spent / (spent + left) if spent + left > 0 else 0.0
        else:
            work = sum(s.total * s.work_per_unit for s in self.stages if s.counted)
            now = sum(s.done * s.work_per_unit for s in self.stages) / work if work else 0.0
            if self._uncounted():
                now /= 2
        self._shown = max(self._shown, min(0.99, now))
        return self._shown

    def current(self) -> StageProgress | None:
        return None if self.active is None else self.stages[self.active]

    def describe(self) -> str:
        """One line for the page and the terminal: what runs now, the time left (or why it is not known yet) and
        the time so far."""
        stage = self.current()
        where = self.describe_stage(stage) if stage else "starting"
        so_far = f"{format_seconds(self.elapsed)} so far"
        if self.finished:
            return f"{where} · {so_far}"
        uncounted = self._uncounted()
        if uncounted:
            follow_ups = ", ".join(dict.fromkeys(q for s in uncounted for q in s.event.questions))
            return f"{where} · estimating the time left until {follow_ups}'s follow-ups are counted · {so_far}"
        left = self.seconds_left()
        if left is not None:
            if not any(s.left for s in self.stages):
                return f"{where} · finishing · {so_far}"
            return f"{where} · about {format_seconds(max(left, 1.0))} left · {so_far}"
        unmeasured = sorted({STAGE_NAMES[s.event.stage] for s in self.stages
                             if s.left and self.seconds_per_unit(s) is None})
        return f"{where} · time left: measured after the first {' and the first '.join(unmeasured)} · {so_far}"

    def describe_stage(self, stage: StageProgress) -> str:
        """What runs now, naming the questions (with their labels) and which of the level's models it is."""
        event = stage.event
        siblings = [s.event.model for s in self.stages if s.event.stage == event.stage
                    and s.event.questions == event.questions]
        which = f" (reader {siblings.index(event.model) + 1} of {len(siblings)})" if len(siblings) > 1 else ""
        return describe_stage(event, stage.done, stage.total, self.labels) + which


class LiveEstimate:
    """Shows a tracker after every event and, between events, every ``tick`` seconds from a thread, so the time so far
    and the time left move while a long unit (a paper with many follow-up questions) runs. Use as a context manager
    around the run; ``attach`` prepares the thread (the app gives it the page's context)."""

    def __init__(self, tracker: ProgressTracker, show: Callable[[ProgressTracker], None], tick: float | None = 1.0,
                 attach: Callable[[threading.Thread], object] | None = None) -> None:
        self.tracker = tracker
        self.show = show
        self.tick = tick
        self.attach = attach
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, event: ProgressEvent) -> None:
        with self._lock:
            self.tracker.update(event)
            self.show(self.tracker)

    def __enter__(self) -> LiveEstimate:
        if self.tick:
            self._thread = threading.Thread(target=self._ticking, name="mlpsych-estimate", daemon=True)
            if self.attach:
                self.attach(self._thread)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _ticking(self) -> None:
        while not self._stop.wait(self.tick):
            with self._lock:
                if self.tracker.active is not None:
                    self.show(self.tracker)


def describe_stage(event: ProgressEvent, done: float, total: int, labels: dict[str, str] | None = None) -> str:
    """``answering q1 (techniques), q3 (research question): paper 3 of 4`` and the like, from an event (no label
    parsing); the model is named only for the LLM and the cascade's small reader, whose role is not the question."""
    questions = ", ".join(f"{q} ({labels[q]})" if labels and q in labels else q for q in event.questions)
    if event.loading:
        what = {"normalize": f"the LLM {short_model(event.model)}", "select": "the small reader"}.get(event.stage,
                                                                                                    "the reader")
        return f"loading {what} for {questions}"
    if event.stage == "normalize":
        return f"LLM {short_model(event.model)} tidying {questions}: batch {done} of {total}"
    count = f"{event.unit} {int(done)} of {total}"
    if event.stage == "select":
        return f"small reader choosing windows for {questions}: {count}"
    return f"answering {questions}: {count}"


def short_model(model: str) -> str:
    """``/long/path/deberta-v2`` or ``deepset/deberta-v3-large-squad2`` -> the last part, for display."""
    return model.rstrip("/").split("/")[-1]


def format_seconds(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
