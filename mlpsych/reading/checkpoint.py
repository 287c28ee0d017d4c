"""A long read's state between batches, so a read interrupted in the middle of a thesis resumes where it stopped.

A reader call reads its (query, window) features in one fixed order (by length) and batches, and each batch only
adds to what the call holds: every query's span candidates, its windows' no-answer scores and, where same texts are
summed, its records per text. That state after a batch, saved whole (nothing pruned or summed beyond what the reader
itself did), and the same batches read after it, give the uninterrupted call's spans bit for bit: how the windows'
candidates become the top k (pruning, dedupe, sums, the no-answer floor) is done on exactly what that call held.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from mlpsych.documents import Document
from mlpsych.reading.decode import WindowCandidate

if TYPE_CHECKING:
    from mlpsych.reading.reader import Query

# A call's state is saved after the batch that ends this much reading since its start or its last save (what an
# interruption loses): a time, not a number of windows, because a window costs from a millisecond (a GPU) to a
# second (a large reader on a laptop CPU) while a save costs what the state's size does.
CHECKPOINT_SECONDS = 30.0
# And after at least this many times as long as the last save took: the state grows with the paper (a 300-page
# thesis's texts summed for three questions were 18 MB, 2 s to save on a busy 2-core CPU: benchmarks/README.md,
# read_checkpoints), and saving stays under 1% of the read however long the paper.
READ_PER_SAVE = 100.0


@dataclass
class Schedule:
    """When a call's state is saved next (the policy above)."""

    since: float = field(default_factory=time.monotonic)
    wait: float = field(default_factory=lambda: CHECKPOINT_SECONDS)

    def due(self) -> bool:
        return time.monotonic() - self.since >= self.wait

    def save(self, save: Callable[..., None], *args: Any) -> None:
        """``save(*args)``, timed for the next."""
        started = time.monotonic()
        save(*args)
        self.since = time.monotonic()
        self.wait = max(CHECKPOINT_SECONDS, READ_PER_SAVE * (self.since - started))


def _row(c: WindowCandidate) -> tuple:
    """A candidate as its fields in order (``WindowCandidate(*row)`` makes it again)."""
    return c.char_start, c.char_end, c.score, c.null_score, c.window, c.rank


@dataclass
class ReadState:
    """What one reader call has read: ``position`` features of its length order, in batches of ``batch_size`` on
    ``device`` (the rest is read alike, so its float noise is the same), and per query of the call (papers' queries
    in call order) its candidates, null scores and summed records by text."""

    position: int
    batch_size: int
    device: str
    candidates: list[list[WindowCandidate]]
    nulls: list[list[float]]
    sums: list[dict[str, WindowCandidate]]

    @classmethod
    def start(cls, queries: int, batch_size: int, device: str) -> ReadState:
        return cls(0, batch_size, device, [[] for _ in range(queries)], [[] for _ in range(queries)],
                   [{} for _ in range(queries)])

    def resumes(self, fresh: ReadState) -> bool:
        """Whether a call that would start as ``fresh`` can go on from this state: the same queries, batches and
        device (a batch halved on out-of-memory, or another device, gives other float noise from here on)."""
        return ((len(self.candidates), self.batch_size, self.device)
                == (len(fresh.candidates), fresh.batch_size, fresh.device))

    def to_dict(self) -> dict[str, Any]:
        """As JSON takes it: floats written as Python writes them read back the same, bit for bit."""
        return {"position": self.position, "batch_size": self.batch_size, "device": self.device,
                "candidates": [[_row(c) for c in found] for found in self.candidates], "nulls": self.nulls,
                "sums": [[[text, _row(c)] for text, c in sums.items()] for sums in self.sums]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReadState:
        return cls(data["position"], data["batch_size"], data["device"],
                   [[WindowCandidate(*c) for c in found] for found in data["candidates"]], data["nulls"],
                   [{text: WindowCandidate(*c) for text, c in sums} for sums in data["sums"]])


# The papers of one reader call, each with its queries (``Reader.run_many``'s argument).
Call = Sequence[tuple[Document, Sequence["Query"]]]


class Checkpoints(Protocol):
    """Where a reader keeps its calls' states (the run's result cache), found again by the call's papers and
    queries."""

    def load(self, call: Call) -> ReadState | None: ...

    def save(self, call: Call, state: ReadState) -> None: ...
