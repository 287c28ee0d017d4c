"""The command line's one progress line: stage, papers done, time so far and time left, from the pipeline's events.

It is the app's estimate (:class:`mlpsych.estimate.ProgressTracker`), so both say the same thing: "estimating" until
a follow-up level's sub-questions are counted, never "0 s left" while work remains. On a terminal the line is
rewritten in place and its clock ticks every second between events (a paper with many follow-up questions can take
a while); into a file or pipe it is one line per stage, and one a minute within a long stage (a study of thousands
of papers spends hours in one), so logs stay short and still say how far the run is.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from mlpsych.estimate import LiveEstimate, ProgressTracker


PRINT_EVERY = 60.0  # seconds between the lines of one stage written into a file or pipe


class ProgressLine(LiveEstimate):
    """Pass :meth:`update` as the pipeline's ``on_progress``; use as a context manager around the run."""

    def __init__(self, tracker: ProgressTracker, stream: TextIO | None = None, tick: float = 1.0,
                 every: float = PRINT_EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        live = self.stream.isatty()
        super().__init__(tracker, self._draw if live else self._print_new_stage, tick if live else None)
        self._printed: tuple | None = None
        self._printed_at = 0.0
        self.every = every
        self.clock = clock
        self._width = 0

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self._width:  # the end line replaces the progress line
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()

    @staticmethod
    def line(tracker: ProgressTracker) -> str:
        return f"[{tracker.fraction():4.0%}] {tracker.describe()}"

    def _draw(self, tracker: ProgressTracker) -> None:
        text = self.line(tracker)
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def _print_new_stage(self, tracker: ProgressTracker) -> None:
        """A line when the stage changes, or once ``every`` seconds have passed since the last line: a log of one
        line per stage said "paper 0 of 5000" for the hours a large study's first stage takes."""
        stage = tracker.current()
        if stage is None:
            return
        now = self.clock()
        if (stage.event.key, stage.event.loading) == self._printed and now - self._printed_at < self.every:
            return
        self._printed = (stage.event.key, stage.event.loading)
        self._printed_at = now
        self.stream.write(self.line(tracker) + "\n")
        self.stream.flush()
