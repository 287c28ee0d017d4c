"""The run's progress bar and time estimate, built from the pipeline's typed progress events (app and command line).

The plan (``Pipeline.plan``) fixes every stage and its units before the first event, so the total does not jump
as stages start; an event only shrinks a stage that had less to do (a paper that failed, a follow-up level with
fewer papers) or resizes a follow-up level's LLM batches. Time left is measured per kind of stage: seconds per
paper read, seconds per LLM batch. A kind that has not finished a unit yet has no estimate, and the line says so
instead of guessing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from mlpsych.progress import ProgressEvent


@dataclass
class StageProgress:
    """One stage of the run as the estimate sees it: units done of units to do, and seconds spent on it."""

    event: ProgressEvent  # the latest event of the stage (or its plan entry)
    total: int
    done: int = 0
    seconds: float = 0.0

    @property
    def left(self) -> int:
        return max(0, self.total - self.done)


class ProgressTracker:
    """Subscribes to ``ProgressEvent``s (pass :meth:`update` as the pipeline's ``on_progress``)."""

    def __init__(self, plan: list[ProgressEvent], clock: Callable[[], float] = time.monotonic) -> None:
        self.stages = [StageProgress(event, event.total) for event in plan]
        self.clock = clock
        self.started = self.last = clock()
        self.active: int | None = None
        self.finished = False

    def update(self, event: ProgressEvent) -> None:
        now = self.clock()
        if self.active is not None:  # the time since the last event was spent on the stage then running
            self.stages[self.active].seconds += now - self.last
        self.last = now
        index = self._find(event)
        for earlier in self.stages[:index]:  # stages passed over had no (more) work
            earlier.total = earlier.done
        self.active = index
        stage = self.stages[index]
        stage.event = event
        stage.total = event.total
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

    def fraction(self) -> float:
        """Units done of units planned; never full before the run has finished."""
        if self.finished:
            return 1.0
        return min(0.99, self.done / self.total) if self.total else 0.0

    def seconds_per_unit(self, stage: str) -> float | None:
        """Measured seconds per unit (paper read, LLM batch) of one kind of stage; None before its first unit."""
        done = sum(s.done for s in self.stages if s.event.stage == stage)
        spent = sum(s.seconds for s in self.stages if s.event.stage == stage)
        if self.active is not None and self.stages[self.active].event.stage == stage:
            spent += self.clock() - self.last
        return spent / done if done else None

    def seconds_left(self) -> float | None:
        """Units left times the measured time per unit of their kind; None while some kind is unmeasured."""
        if self.finished:
            return 0.0
        left = 0.0
        for kind in {s.event.stage for s in self.stages if s.left}:
            rate = self.seconds_per_unit(kind)
            if rate is None:
                return None
            left += rate * sum(s.left for s in self.stages if s.event.stage == kind)
        return left

    def current(self) -> StageProgress | None:
        return None if self.active is None else self.stages[self.active]

    def describe(self) -> str:
        """One line for the page: what runs now, then the estimate and what it is based on."""
        stage = self.current()
        where = describe_stage(stage.event, stage.done, stage.total) if stage else "starting"
        left = self.seconds_left()
        if left is not None:
            return f"{where} · about {format_seconds(left)} left ({format_seconds(self.elapsed)} so far)"
        unmeasured = sorted({STAGE_NAMES[s.event.stage] for s in self.stages
                             if s.left and self.seconds_per_unit(s.event.stage) is None})
        return f"{where} · time left: measured after the first {' and the first '.join(unmeasured)}"


STAGE_NAMES = {"read": "paper", "select": "paper read by the small reader", "normalize": "LLM batch"}


def describe_stage(event: ProgressEvent, done: int, total: int) -> str:
    """``Reading q1,q2 with deberta-v2: paper 3 of 4`` and the like, from an event (no label parsing)."""
    questions = ",".join(event.questions)
    model = short_model(event.model)
    if event.loading:
        return f"loading {model} for {questions}"
    if event.stage == "normalize":
        return f"LLM {model} tidying {questions}: batch {done} of {total}"
    if event.stage == "select":
        return f"choosing windows for {questions} with {model}: paper {done} of {total}"
    return f"reading {questions} with {model}: paper {done} of {total}"


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
