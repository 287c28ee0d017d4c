"""A review's workbook written a while after its last change, not only when the coder leaves the paper.

Each change of a review is kept at once beside the workbook (:mod:`mlpsych.journal`), which every mlpsych command
reads; the workbook itself was written only when the coder moved to another paper or downloaded it. A coder who
closed the tab (or stopped the app) on a paper left the workbook without that paper's coding, and a workbook then
opened in Excel or mailed to a second coder lacked it. Here a write is due once the coding has rested a while, and
at the interpreter's exit for whatever is still due (a stopped app).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

IDLE_WRITE_S = 30.0  # seconds without a change after which a review's workbook is written

_DUE: set[IdleWrite] = set()  # writes waiting for their time, done at exit if it has not come
_DUE_LOCK = threading.Lock()


class IdleWrite:
    """Calls ``write`` once ``seconds`` pass without another :meth:`touch` (in a timer thread), or at exit; None
    ``seconds``: only when asked."""

    def __init__(self, write: Callable[[], None], seconds: float | None = IDLE_WRITE_S) -> None:
        self.write = write
        self.seconds = seconds
        self._timer: threading.Timer | None = None

    def touch(self) -> None:
        """A change: the write is due ``seconds`` from now (the wait starts again)."""
        if self.seconds is None:
            return
        timer = threading.Timer(self.seconds, self._due)
        timer.daemon = True  # a process stopping writes what is due at exit instead of waiting for the timer
        with _DUE_LOCK:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = timer
            _DUE.add(self)
        timer.start()

    def cancel(self) -> None:
        """Nothing due any more (the workbook was written)."""
        with _DUE_LOCK:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            _DUE.discard(self)

    def _due(self) -> None:
        self.cancel()
        self.write()


@atexit.register
def _write_due() -> None:
    """What is still due when the interpreter exits (the app stopped with Ctrl-C), written now."""
    with _DUE_LOCK:
        due = list(_DUE)
    for waiting in due:
        waiting.cancel()
        try:
            waiting.write()
        except Exception:  # noqa: BLE001 - one workbook's failure must not keep the others unwritten
            log.exception("a review's workbook could not be written at exit (its changes stay kept beside it)")
