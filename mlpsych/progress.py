"""Progress as typed events: what the pipeline reports and front ends (the app's estimate) subscribe to.

A front end keys its stages on ``(stage, questions, model)`` instead of parsing label strings, and learns the LLM
the pipeline will use from the events (or the pipeline's plan), so it never hard-codes a model id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Stage = Literal["read", "select", "normalize"]  # select: a cascade's small reader choosing windows
Unit = Literal["paper", "sub-question", "batch"]  # a follow-up level reads sub-questions, not whole papers


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a run: ``done`` of ``total`` units of a stage (one model's reading or one LLM's batches).

    ``loading`` is true just before the stage's model is loaded (the wait that follows is the load, not work);
    ``questions`` are the question ids the stage answers (one level of the run). A follow-up level's size is not
    known before the level it bridges from is answered: its plan entries have ``counted`` false (``total`` 0),
    and once its sub-questions exist the pipeline reports each of its stages with ``sizing`` true (its real
    ``total``, no work started yet).
    """

    stage: Stage
    questions: tuple[str, ...]
    model: str
    done: float  # whole units, or a part of a long paper's way through its read
    total: int
    unit: Unit
    loading: bool = False
    counted: bool = True
    sizing: bool = False

    @property
    def key(self) -> tuple[Stage, tuple[str, ...], str]:
        """What identifies the stage across its events (and the plan's entry for it)."""
        return (self.stage, self.questions, self.model)


ProgressCallback = Callable[[ProgressEvent], None]
