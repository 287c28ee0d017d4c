"""CUDA out of memory while reading: the batch is halved and retried (said so in the log), down to one window.

There is no GPU in CI, so the model's forward raises ``torch.cuda.OutOfMemoryError`` for batches above a
size: this tests our retry code with the real tiny model doing the reading, not the CUDA allocator.
"""

from __future__ import annotations

import logging

import pytest
import torch

from mlpsych.cache import ResultCache
from mlpsych.documents import Document
from mlpsych.pipeline import Pipeline
from mlpsych.questions import QuestionSet, QuestionTemplate
from mlpsych.reading.reader import Query, Reader
from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings
from tests.gpu_memory import memory_limit, needs_cuda, peak_bytes

TEXT = ("We trained random forests and support vector machines on essays written by 312 participants. "
        "Models were fitted with scikit-learn in Python and with the caret package in R. ") * 10
QUERIES = [Query("q1", "What methods were used?", top_k=5, max_answer_tokens=20)]
READER = ReaderSettings(max_length=96, stride=24, question_tokens=16, batch_size=8, layout="shared")


def limit_batches(reader: Reader, largest: int) -> list[int]:
    """Make the loaded model fail like CUDA does for batches above ``largest``; returns the sizes it ran."""
    forward = reader.model.forward
    sizes: list[int] = []

    def guarded(*args, **kwargs):
        rows = kwargs["input_ids"].shape[0]
        if rows > largest:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (simulated, batch of {rows})")
        sizes.append(rows)
        return forward(*args, **kwargs)

    reader.model.forward = guarded
    return sizes


def spans(found) -> list[tuple]:
    return [(s.start, s.end, round(s.score, 5)) for s in found[0]]


@pytest.mark.slow
def test_oom_halves_the_batch_and_reads_the_same(tiny_models, caplog) -> None:
    doc = Document(id="p", text=TEXT)
    plain = Reader(str(tiny_models["bert"]), READER)
    expected = plain.run(doc, QUERIES)
    assert plain.windows_read > 8  # several batches of 8

    reader = Reader(str(tiny_models["bert"]), READER)
    reader.warm_up()
    sizes = limit_batches(reader, largest=2)
    with caplog.at_level(logging.WARNING, logger="mlpsych.models"):
        found = reader.run(doc, QUERIES)
    halvings = [r.getMessage() for r in caplog.records if "out of memory" in r.getMessage()]
    assert len(halvings) == 2 and halvings[0].endswith("halved to 4 and retried")
    assert halvings[1].endswith("halved to 2 and retried")
    assert max(sizes) == 2 and sum(sizes) == plain.windows_read  # every window read once, none lost
    assert spans(found) == spans(expected)


@pytest.mark.slow
def test_oom_at_batch_one_fails_that_paper_only(tiny_models, tmp_path) -> None:
    """When even one window does not fit, the paper gets an error and the other papers are answered."""
    question = QuestionTemplate(id="q1", text="What methods were used?", models=[str(tiny_models["bert"])])
    settings = RunSettings(reader=READER, llm=LLMSettings(enabled=False))
    pipeline = Pipeline(QuestionSet(questions=[question]), settings, ResultCache(tmp_path), progress=False,
                        keep_loaded=True)
    big = Document(id="big", text=TEXT * 3)
    small = Document(id="small", text=TEXT[:300])
    pipeline.run([small])  # loads the reader, kept for the next run
    reader = pipeline.models.readers[str(tiny_models["bert"])]
    reader._batch_size = 1
    original = reader.model.forward

    def fails_on_big(*args, **kwargs):
        if kwargs["input_ids"].shape[1] > 64:  # a full window (only the big paper has them) does not fit
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return original(*args, **kwargs)

    reader.model.forward = fails_on_big
    assert len(reader.windows(Document(id="first", text=TEXT[:200]))) == 1 < len(reader.windows(big))
    result = pipeline.run([Document(id="first", text=TEXT[:200]), big])
    assert "out of memory" in " ".join(result.errors["big"])
    assert {a.doc_id for a in result.answers if a.final} == {"first"}


@needs_cuda
def test_on_a_gpu_too_small_for_the_batch_the_reader_halves_it_and_reads_the_same(tiny_models, caplog) -> None:
    """The device machine's check: CUDA's allocator, capped, refuses a batch of 128 full windows (fp32, so that
    batches of other sizes give the same logits)."""
    doc = Document(id="p", text=TEXT * 80)
    queries = [Query(f"q{i}", question, top_k=5, max_answer_tokens=20) for i, question in
               enumerate(["What methods were used?", "What software was used?", "How many participants?"])]
    settings = READER.model_copy(update=dict(max_length=512, stride=128, batch_size=4, device="cuda", dtype="fp32"))
    small = Reader(str(tiny_models["bert"]), settings)
    small.warm_up()
    expected = small.run(doc, queries)  # first, so what a process allocates once (cuBLAS's workspace) is held
    fits = peak_bytes(lambda: small.run(doc, queries))  # what batches of 4 windows need
    windows = small.windows_read // 2
    big = Reader(str(tiny_models["bert"]), settings.model_copy(update=dict(batch_size=128)))
    big.warm_up()
    assert windows >= 2 * 128 and peak_bytes(lambda: big.run(doc, queries)) > 8 * fits
    big.windows_read = 0
    with memory_limit(2 * fits + 2**26), caplog.at_level(logging.WARNING, logger="mlpsych.models"):
        found = big.run(doc, queries)
    halvings = [r.getMessage() for r in caplog.records if "out of memory" in r.getMessage()]
    assert halvings and halvings[0].endswith("batch size halved to 64 and retried") and 4 <= big._batch_size < 128
    assert big.windows_read == windows  # every window read once, none lost
    for qi in range(len(queries)):
        assert [(s.start, s.end) for s in found[qi]] == [(s.start, s.end) for s in expected[qi]]
        assert [s.score for s in found[qi]] == pytest.approx([s.score for s in expected[qi]], abs=1e-4)
