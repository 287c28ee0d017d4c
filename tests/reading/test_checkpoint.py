"""A reader call saved between batches and resumed: the spans of a call never interrupted, whatever the decoding."""

from __future__ import annotations

import pytest

import mlpsych.reading.reader as reader_module
from mlpsych.dev.tiny import corpus
from mlpsych.documents import Document
from mlpsych.reading import checkpoint
from mlpsych.reading.checkpoint import Call, ReadState
from mlpsych.reading.reader import Query, Reader
from mlpsych.settings import ReaderSettings

DOC = Document(id="thesis", text=" ".join(corpus(80)))
QUERIES = [Query("q1", "What methods were used?", 5, 8), Query("q2", "Which software?", 3, 6, allow_empty=True)]
STOPPED = 3  # batches read when the call is interrupted: the third's hook interrupts it, so two are saved


class Saved:
    """Checkpoints kept in memory, as the result cache keeps them (through JSON's ``to_dict``)."""

    def __init__(self) -> None:
        self.states: dict[tuple, dict] = {}

    def load(self, call: Call) -> ReadState | None:
        state = self.states.get(self._key(call))
        return None if state is None else ReadState.from_dict(state)

    def save(self, call: Call, state: ReadState) -> None:
        self.states[self._key(call)] = state.to_dict()

    @staticmethod
    def _key(call: Call) -> tuple:
        return tuple((doc.sha256, tuple(queries)) for doc, queries in call)


def interrupted(reader: Reader) -> Saved:
    """Reader's call of DOC interrupted (as by Ctrl-C) in its ``STOPPED``-th batch, its checkpoints kept."""
    batches = 0

    def on_batch(read: int, total: int) -> None:
        nonlocal batches
        batches += 1
        if batches == STOPPED:
            raise KeyboardInterrupt

    reader.checkpoints, reader.on_batch = Saved(), on_batch
    with pytest.raises(KeyboardInterrupt):
        reader.run(DOC, QUERIES)
    reader.on_batch = None
    return reader.checkpoints


def spans(found: dict) -> dict:
    return {qi: [s.to_dict() for s in found[qi]] for qi in found}


@pytest.mark.parametrize("decoding", [{}, {"same_text": "kept", "dedupe": True}, {"search": "n_best"},
                                      {"search": "pipeline", "same_text": "kept"}])
def test_a_resumed_call_gives_the_spans_of_one_never_interrupted(tiny_models, monkeypatch, decoding):
    """Candidates pruned along the way (as in a long paper), same texts summed or kept, deduped or not, each
    search: the saved state is the reader's whole state, so the resumed call's spans are the same to the bit."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_SECONDS", 0.0)
    monkeypatch.setattr(checkpoint, "READ_PER_SAVE", 0.0)
    monkeypatch.setattr(reader_module, "CANDIDATES_KEPT", 16)
    settings = ReaderSettings(max_length=96, stride=24, batch_size=4, **decoding)
    whole = Reader(str(tiny_models["bert"]), settings)
    expected = whole.run(DOC, QUERIES)
    assert whole.windows_read > 4 * STOPPED * 4

    reader = Reader(str(tiny_models["bert"]), settings)
    interrupted(reader)
    before = reader.windows_read
    assert spans(reader.run(DOC, QUERIES)) == spans(expected)
    assert reader.windows_read - before == whole.windows_read - (STOPPED - 1) * 4


def test_a_call_in_other_batches_starts_again(tiny_models, monkeypatch):
    """A checkpoint read in batches of 4 is not taken up by a reader reading 8 at a time (its batches, and so its
    float noise, differ from the interrupted call's): it reads every window."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_SECONDS", 0.0)
    monkeypatch.setattr(checkpoint, "READ_PER_SAVE", 0.0)
    saved = interrupted(Reader(str(tiny_models["bert"]), ReaderSettings(max_length=96, stride=24, batch_size=4)))
    other = Reader(str(tiny_models["bert"]), ReaderSettings(max_length=96, stride=24, batch_size=8))
    other.checkpoints = saved
    other.run(DOC, QUERIES)
    assert saved.states and other.windows_read == len(other._features([(DOC, QUERIES)]))  # every (query, window)


def test_saves_wait_30_s_of_reading_or_a_hundred_times_the_last_save(monkeypatch):
    """A thesis's state grows as it is read: a save of 2 s waits 200 s of reading, so saving stays under 1%."""
    now = [0.0]
    monkeypatch.setattr(checkpoint.time, "monotonic", lambda: now[0])
    schedule = checkpoint.Schedule(since=0.0)
    now[0] = 29.9
    assert not schedule.due()
    now[0] = 30.0
    assert schedule.due()

    def save(seconds: float) -> None:
        now[0] += seconds

    schedule.save(save, 2.0)
    now[0] = 231.9
    assert not schedule.due()
    now[0] = 232.0
    assert schedule.due()
    schedule.save(save, 0.01)
    now[0] += 30.0
    assert schedule.due()
