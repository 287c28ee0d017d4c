"""CPU memory while reading is bounded by the windows in flight (one batch), not by the paper's length."""

from __future__ import annotations

import tracemalloc

import pytest

import mlpsych.reading.reader as reader_module
from mlpsych.dev.tiny import corpus
from mlpsych.documents import Document
from mlpsych.reading.reader import Query, Reader
from mlpsych.settings import ReaderSettings

QUERIES = [Query("q1", "What methods were used?", top_k=5, max_answer_tokens=20),
           Query("q2", "What software was used?", top_k=3, max_answer_tokens=10, allow_empty=True)]
SETTINGS = ReaderSettings(max_length=128, stride=16, question_tokens=16, batch_size=8)


def peak_while_reading(reader: Reader, doc: Document) -> tuple[int, dict]:
    """Peak Python memory of reading ``doc`` (its tokenization, which is the paper itself, done before)."""
    reader.encode(doc)
    tracemalloc.start()
    try:
        found = reader.run(doc, QUERIES)
        return tracemalloc.get_traced_memory()[1], found
    finally:
        tracemalloc.stop()


def spans(found: dict) -> dict:
    return {qi: [(s.start, s.end, round(s.score, 6)) for s in spans] for qi, spans in found.items()}


def growth(tiny_model: str, same_text: str) -> tuple[int, int, int, int]:
    """Peak memory of reading a paper and the same paper four times over, the extra windows the long one read, and
    the windows of the short one, for a reader with this ``same_text``."""
    text = " ".join(corpus(100))
    reader = Reader(tiny_model, SETTINGS.model_copy(update={"same_text": same_text}))
    reader.warm_up()
    short, _ = peak_while_reading(reader, Document(id="short", text=text))
    windows_short = reader.windows_read
    long, _ = peak_while_reading(reader, Document(id="long", text=" ".join([text] * 4)))
    return short, long, reader.windows_read - 2 * windows_short, windows_short  # the long one: 4x the windows


@pytest.mark.slow
def test_reading_memory_does_not_grow_with_the_paper(tiny_models, monkeypatch) -> None:
    monkeypatch.setattr(reader_module, "CANDIDATES_KEPT", 256)  # the cap (2048 by default) is reached at this size
    short, long, extra, windows_short = growth(str(tiny_models["bert"]), "kept")
    assert extra > 2 * windows_short
    # Building every window's features first, and keeping every span candidate, cost ~16 KB per window here;
    # now only a small plan entry and a null score are kept per window.
    assert (long - short) / extra < 1024
    assert long < 2 * short


@pytest.mark.slow
def test_summing_same_texts_keeps_one_record_per_text(tiny_models, monkeypatch) -> None:
    """Where same texts are summed (the default), a span's score depends on every window, so one record per
    distinct text is kept for the whole paper: memory grows with the texts found (with random weights, nearly every
    window finds new ones), still far below keeping every window's candidates (~16 KB a window here)."""
    monkeypatch.setattr(reader_module, "CANDIDATES_KEPT", 256)
    short, long, extra, _ = growth(str(tiny_models["bert"]), "summed")
    assert (long - short) / extra < 8 * 1024


@pytest.mark.slow
def test_pruning_candidates_while_reading_changes_nothing(tiny_models, monkeypatch) -> None:
    doc = Document(id="p", text=" ".join(corpus(120)))
    reader = Reader(str(tiny_models["bert"]), SETTINGS)
    kept_all = spans(reader.run(doc, QUERIES))
    monkeypatch.setattr(reader_module, "CANDIDATES_KEPT", 8)  # prune after every batch
    assert spans(reader.run(doc, QUERIES)) == kept_all
    assert all(kept_all.values())
