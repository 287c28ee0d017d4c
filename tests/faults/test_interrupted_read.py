"""A thesis whose read is interrupted in the middle (Ctrl-C, a crash): the rerun reads only the windows not yet
read, and answers as a run never interrupted."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest

from mlpsych.cache import ResultCache
from mlpsych.documents import Document
from mlpsych.dev.tiny import corpus
from mlpsych.pipeline import Pipeline
from mlpsych.cache import CHECKPOINT_STAGE
from mlpsych.questions import load_question_set
from mlpsych.reading import checkpoint
from mlpsych.reading.reader import Reader
from mlpsych.settings import CascadeSettings, LLMSettings, ReaderSettings, RetrievalSettings, RunSettings

BATCH = 4
STOP = 6  # the forward pass at which the run is interrupted: five batches were read before it


def questions(tmp_path: Path, model: Path, cascade: bool = False):
    """Two questions on one reader, one that may have no answer: one call reads both, with no-answer scores (and,
    in a ``cascade``, each reads the one window the small reader's answers weigh most in)."""
    path = tmp_path / "questions.yaml"
    chosen = "    retrieval: {mode: bm25, budget: 1}\n" if cascade else ""
    path.write_text(
        "questions:\n"
        f"  - id: q1\n    text: What machine learning techniques were used?\n    models: ['{model}']\n    top_k: 5\n"
        + chosen
        + f"  - id: q2\n    text: What software was used?\n    models: ['{model}']\n    top_k: 3\n"
        "    allow_empty: true\n" + chosen,
        encoding="utf-8",
    )
    return load_question_set(path)


def papers() -> list[Document]:
    """A short paper and a thesis, read in one group (its windows share batches)."""
    text = " ".join(corpus(40))
    return [Document(id="short", text=text[:1500]), Document(id="thesis", text=" ".join([text] * 4))]


def run(tmp_path: Path, model: Path, cache: Path, small: Path | None = None) -> Pipeline:
    """The two papers read by ``model``, or, with a ``small`` reader, by the cascade (the small reader reads every
    window first: the interruption falls in its read)."""
    retrieval = (RetrievalSettings() if small is None
                 else RetrievalSettings(read="retrieve", cascade=CascadeSettings(model=str(small), mass=0.5)))
    settings = RunSettings(reader=ReaderSettings(max_length=96, stride=24, batch_size=BATCH),
                           llm=LLMSettings(enabled=False), retrieval=retrieval)
    pipeline = Pipeline(questions(tmp_path, model, small is not None), settings, ResultCache(cache), progress=False)
    pipeline.result = pipeline.run(papers())
    return pipeline


def checkpoints(cache: Path) -> int:
    with sqlite3.connect(cache / "results.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM results WHERE stage = ?", (CHECKPOINT_STAGE,)).fetchone()[0]


def answers(pipeline: Pipeline) -> list[dict]:
    return [a.to_dict() for a in pipeline.result.answers]


@pytest.mark.slow
@pytest.mark.parametrize(("interruption", "small"), [("ctrl-c", None), ("crash", None), ("ctrl-c", "electra")])
def test_an_interrupted_thesis_is_read_on_from_where_it_stopped(tiny_models, tmp_path, monkeypatch, interruption,
                                                                small):
    """Ctrl-C (a real SIGINT, during a forward pass) ends the run; a crash of the reader from some batch on (out
    of memory) fails the papers read with it and the run goes on. Either way the rerun resumes the read after the
    last batch read, and its answers are the uninterrupted run's, to the last bit of every score. A cascade's small
    reader, interrupted in its read of every window, resumes alike."""
    model = tiny_models["bert"]
    small_reader = tiny_models[small] if small else None
    whole = run(tmp_path, model, tmp_path / "whole", small_reader)
    assert whole.windows_read > 4 * STOP * BATCH  # the interruption comes early in the read

    monkeypatch.setattr(checkpoint, "CHECKPOINT_SECONDS", 0.0)
    monkeypatch.setattr(checkpoint, "READ_PER_SAVE", 0.0)  # after every batch, as after 30 s of a long read
    forward, passes = Reader._forward, 0

    def interrupted(self: Reader, batch):
        nonlocal passes
        passes += 1
        if passes == STOP and interruption == "ctrl-c":
            os.kill(os.getpid(), signal.SIGINT)  # Python raises KeyboardInterrupt at once, in this thread
        if passes >= STOP and interruption == "crash":
            raise RuntimeError("CPU out of memory (simulated)")
        return forward(self, batch)

    monkeypatch.setattr(Reader, "_forward", interrupted)
    cache = tmp_path / "cache"
    if interruption == "ctrl-c":
        heard = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, wherever pytest runs
        try:
            with pytest.raises(KeyboardInterrupt):
                run(tmp_path, model, cache, small_reader)
        finally:
            signal.signal(signal.SIGINT, heard)
    else:
        failed = run(tmp_path, model, cache, small_reader)
        assert set(failed.result.errors) == {"short", "thesis"} and not failed.result.answers
    assert checkpoints(cache) == 1

    monkeypatch.setattr(Reader, "_forward", forward)
    rerun = run(tmp_path, model, cache, small_reader)
    assert rerun.windows_read == whole.windows_read - (STOP - 1) * BATCH  # only the windows not read before
    assert answers(rerun) == answers(whole)
    assert checkpoints(cache) == 0  # the whole reads are cached: their checkpoint is gone
