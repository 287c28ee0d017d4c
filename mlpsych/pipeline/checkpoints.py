"""A reader's checkpoints in the run's result cache: a thesis whose read is interrupted (Ctrl-C, a crash, the
laptop's sleep, out of memory) is read on from its last checkpoint by the rerun, not from its first page.

A checkpoint is found by the whole reads its call makes (their cache keys: the papers, the model, the questions, the
windows and the settings), so it is taken up only by a call reading exactly those; once they are cached it is
removed, and the whole reads' entries are what a rerun uses, as before checkpoints existed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from mlpsych.cache import CHECKPOINT_STAGE, ResultCache, make_key
from mlpsych.documents import Document
from mlpsych.reading.checkpoint import Call, ReadState
from mlpsych.reading.reader import Query

# The version of the checkpoints' format, in their key (an older one is not read).
FORMAT = 1


class CachedCheckpoints:
    """One cached reader's checkpoints: ``read_key`` is its whole read's cache key for a paper and query."""

    def __init__(self, cache: ResultCache, read_key: Callable[[Document, Query], str]) -> None:
        self.cache = cache
        self.read_key = read_key

    def key(self, call: Call) -> str:
        return make_key(stage=CHECKPOINT_STAGE, format=FORMAT,
                        reads=[self.read_key(doc, query) for doc, queries in call for query in queries])

    def load(self, call: Call) -> ReadState | None:
        saved = self.cache.get(self.key(call), counted=False)
        return None if saved is None else ReadState.from_dict(saved)

    def save(self, call: Call, state: ReadState) -> None:
        self.cache.put(self.key(call), state.to_dict(), stage=CHECKPOINT_STAGE)

    def drop(self, group: Call, read: Collection[str]) -> None:
        """After the whole reads of ``group``'s papers whose ids are in ``read`` are cached: the group's checkpoint
        (a rerun, with those papers cached, groups the rest otherwise) and theirs read alone (after the group's call
        failed). A paper that failed keeps its own, for the rerun."""
        done = [paper for paper in group if paper[0].id in read]
        if done:
            self.cache.delete(*{self.key(group), *(self.key([paper]) for paper in done)})
