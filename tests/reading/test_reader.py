"""The reader on tiny real models of every family: windows, offsets into the paper, batching, null handling."""

from __future__ import annotations

import pytest

from mlpsych.documents import Document
from mlpsych.reading.reader import Query, Reader
from mlpsych.settings import ReaderSettings

TEXT = " ".join(
    f"In study {i}, participants (N = {100 + i}) were classified with random forests and support vector machines; "
    f"the models were fitted in R with the caret package."
    for i in range(40)
)
QA_FAMILIES = ["deberta-v2", "albert", "electra", "roberta", "bert"]
# mlpsych's own way of reading (windows shared by every question, n-best search, one span per place); the
# pipeline's way, the default, is tested in test_reference_reading.py
SHARED = dict(layout="shared", snap_to_words=False, keep_blank_tokens=False, search="n_best", dedupe=True)


@pytest.mark.parametrize("family", QA_FAMILIES)
def test_spans_point_into_the_paper_for_every_family(tiny_models, family):
    doc = Document(id="d", text=TEXT, pages=[(0, len(TEXT) // 2), (len(TEXT) // 2, len(TEXT))])
    reader = Reader(str(tiny_models[family]), ReaderSettings(**SHARED, max_length=96, stride=24, question_tokens=24, batch_size=5))
    windows = reader.windows(doc)
    assert reader.model is None  # windowing needs the tokenizer only
    assert len(windows) > 3
    for a, b in zip(windows, windows[1:]):
        assert b.token_start == a.token_end - 24  # consecutive windows share `stride` tokens
        assert b.char_start < a.char_end
    assert windows[0].char_start == 0 and windows[-1].char_end == len(TEXT.rstrip())

    queries = [Query("q1", "What methods were used?", 7, 8), Query("q2", "Which software?", 3, 4)]
    spans = reader.run(doc, queries)
    assert reader.windows_read == 2 * len(windows)
    assert [len(spans[0]), len(spans[1])] == [7, 3]
    for qi, query in enumerate(queries):
        scores = [s.score for s in spans[qi]]
        assert scores == sorted(scores, reverse=True)
        assert len({(s.start, s.end) for s in spans[qi]}) == len(spans[qi])
        for s in spans[qi]:
            assert s.text == TEXT[s.start : s.end] and s.text.strip() == s.text
            assert s.page == (1 if s.start < len(TEXT) // 2 else 2)
            assert 0 < s.score <= 1 and s.null_score is not None
            assert s.question_id == query.question_id and s.model == str(tiny_models[family])
    reader.release()
    assert reader.model is None


def test_reading_only_some_windows(tiny_models):
    doc = Document(id="d", text=TEXT)
    reader = Reader(str(tiny_models["bert"]), ReaderSettings(**SHARED, max_length=96, stride=24, question_tokens=24))
    windows = reader.windows(doc)
    spans = reader.run(doc, [Query("q", "What methods were used?", 50, 8, windows=(1, 2))])[0]
    assert reader.windows_read == 2
    assert all(windows[1].char_start <= s.start and s.end <= windows[2].char_end for s in spans)


def test_batch_size_does_not_change_answers(tiny_models):
    doc = Document(id="d", text=TEXT)
    query = [Query("q", "What methods were used?", 10, 8)]
    results = []
    for batch_size in (1, 16):  # fp32: padding must change nothing, and bf16 may round a padded shape differently
        reader = Reader(str(tiny_models["roberta"]), ReaderSettings(**SHARED, max_length=96, stride=24, question_tokens=24,
                                                                     batch_size=batch_size, dtype="fp32"))
        results.append([(s.start, s.end, round(s.score, 5)) for s in reader.run(doc, query)[0]])
    assert results[0] == results[1]


def test_may_be_empty_question_can_return_nothing(tiny_models):
    doc = Document(id="d", text=TEXT)
    reader = Reader(str(tiny_models["electra"]), ReaderSettings(**SHARED, max_length=96, stride=24, question_tokens=24,
                                                                 null_threshold=1.0))
    # Probabilities are at most 1, so a margin of 1 over the no-answer score can never be met.
    assert reader.run(doc, [Query("q", "Which software?", 5, 8, allow_empty=True)])[0] == []


def test_a_long_question_borrows_from_the_overlap_and_leaves_no_token_unread(tiny_models, caplog):
    doc = Document(id="d", text=TEXT)
    reader = Reader(str(tiny_models["bert"]), ReaderSettings(**SHARED, max_length=96, stride=24, question_tokens=8))
    windows = reader.windows(doc)
    long_question = "Which of the machine learning techniques named in this paper were used for classification?"
    with caplog.at_level("WARNING", logger="mlpsych.reading.reader"):
        q_ids = reader._question_ids(long_question)
        reader._question_ids(long_question)
    assert len(q_ids) == 8 + 24 // 2  # room plus half the stride; the rest of the question is cut
    # and said, once: a researcher's long question read without its end changes what is answered
    (record,) = caplog.records
    whole = len(reader.tokenizer(long_question, add_special_tokens=False)["input_ids"])
    assert record.message.startswith(f"question read cut to its first 20 of {whole} tokens")
    read = [reader._context(w, len(windows), len(q_ids))[0] for w in windows]
    for (start, end), w in zip(read, windows):
        assert end - start == (w.token_end - w.token_start) - 12 and w.token_start <= start < end <= w.token_end
        assert reader._template.special_count + len(q_ids) + (end - start) <= 96  # fits the model
    unread = set(range(len(reader.encode(doc).ids))) - {t for s, e in read for t in range(s, e)}
    assert unread == set()

    spans = reader.run(doc, [Query("q", long_question, 20, 8)])[0]
    assert len(spans) == 20 and all(s.text == TEXT[s.start : s.end] for s in spans)
    assert reader._context(windows[1], len(windows), 8) == ((windows[1].token_start, windows[1].token_end),)


def test_papers_read_together_share_batches_and_give_the_same_spans(tiny_models):
    other = TEXT.replace("random forests", "gradient boosting")
    docs = [Document(id="a", text=TEXT), Document(id="b", text=other)]
    queries = [[Query("q1", "What methods were used?", 5, 8, windows=(0, 2, 4))],
               [Query("q1", "What methods were used?", 5, 8, windows=(1, 3)), Query("q2", "Which software?", 3, 4)]]
    # fp32: sharing batches must change nothing, and bf16 may round a padded shape differently
    settings = ReaderSettings(**SHARED, max_length=96, stride=24, batch_size=8, dtype="fp32")
    alone = [Reader(str(tiny_models["electra"]), settings).run(d, q) for d, q in zip(docs, queries)]
    reader = Reader(str(tiny_models["electra"]), settings)
    reader.warm_up()
    batches: list[int] = []
    forward = reader._forward
    reader._forward = lambda batch: (batches.append(len(batch)), forward(batch))[1]
    together = reader.run_many(list(zip(docs, queries)))
    n_windows = 3 + 2 + len(reader.windows(docs[1]))
    assert sum(batches) == n_windows and len(batches) == -(-n_windows // 8)  # full batches across both papers
    for one, many in zip(alone, together):
        assert {qi: [(s.doc_id, s.start, s.end, round(s.score, 5)) for s in spans] for qi, spans in one.items()} == \
               {qi: [(s.doc_id, s.start, s.end, round(s.score, 5)) for s in spans] for qi, spans in many.items()}


def test_batch_size_left_open_is_chosen_for_the_device_and_model(tiny_models):
    assert Reader.default_batch_size("cpu", "deberta-v2", 1024) == 1  # measured faster one window at a time on CPUs
    assert Reader.default_batch_size("cpu", "deberta-v2", 768) == 1
    assert Reader.default_batch_size("cuda", "deberta-v2", 1024) == 32  # measured faster than 8 on an H100 / H200
    assert Reader.default_batch_size("mps", "deberta-v2", 1024) == 8
    assert Reader.default_batch_size("cpu", "electra", 1024) == 8
    reader = Reader(str(tiny_models["deberta-v2"]), ReaderSettings(**SHARED, max_length=96, stride=24, device="cpu"))
    reader.warm_up()
    assert reader._batch_size == 8  # a tiny DeBERTa has no large tensors to spill
    fixed = Reader(str(tiny_models["deberta-v2"]), ReaderSettings(**SHARED, max_length=96, stride=24, batch_size=4, device="cpu"))
    fixed.warm_up()
    assert fixed._batch_size == 4


def test_passages_are_read_packed_and_answers_stay_inside_them(tiny_models):
    from mlpsych.documents import sentence_spans

    doc = Document(id="d", text=TEXT)
    sentences = sentence_spans(TEXT)
    chosen = (sentences[3], sentences[17], sentences[18], sentences[35])  # 17 and 18 touch: one passage
    reader = Reader(str(tiny_models["bert"]), ReaderSettings(**SHARED, max_length=96, stride=24, question_tokens=24))
    query = Query("q1", "What methods were used?", 30, 8, passages=chosen)
    packed = reader.packed_windows(doc, chosen, query.text)
    assert 1 < len(packed) < len(reader.windows(doc))
    spans = reader.run(doc, [query])[0]
    assert reader.windows_read == len(packed)
    assert len(spans) == 30
    for s in spans:  # each answer lies inside one passage (17 + 18 count as one)
        assert any(a <= s.start and s.end <= b for a, b in (sentences[3], (sentences[17][0], sentences[18][1]),
                                                           sentences[35]))
        assert s.text == TEXT[s.start : s.end]


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "deberta-v2", "albert"])
def test_int8_reads_close_to_fp32(tiny_models, family):
    """int8 (linear layers quantized after loading) reads through the same Reader: the same best span as fp32, with
    scores moved by the quantization but only a little."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    doc = Document(id="d", text=TEXT)
    query = Query("q1", "What methods were used?", 10, 8)
    spans = {}
    for dtype in ("fp32", "int8"):
        reader = Reader(str(tiny_models[family]), ReaderSettings(dtype=dtype, device="cpu", max_length=96, stride=24))
        spans[dtype] = reader.run(doc, [query])[0]
    linears = [m for m in reader.model.base_model.modules() if isinstance(m, DynamicLinear)]
    assert linears and type(reader.model.qa_outputs).__name__ == "Linear"  # encoder quantized, span head kept fp32
    fp32, int8 = ({(s.start, s.end): s.score for s in spans[d]} for d in ("fp32", "int8"))
    assert (spans["int8"][0].start, spans["int8"][0].end) == (spans["fp32"][0].start, spans["fp32"][0].end)
    # Below the best, random weights score spans nearly alike, and int8 reorders them: on the device machine's CPU
    # (another vocabulary, another sentencepiece) 7 of the 10 were fp32's, in another order from the second on.
    shared = fp32.keys() & int8.keys()
    assert len(shared) >= 5 and 0 < max(abs(fp32[k] - int8[k]) for k in shared) < 0.1 * max(fp32.values())


@pytest.mark.parametrize("family", ["deberta-v2", "bert"])
def test_release_frees_the_model_without_a_full_collection(tiny_models, family, monkeypatch):
    """Reference counting frees a read model; a full collection (slow with a run's records in memory) is left for
    a model something still holds."""
    import gc
    import weakref

    from mlpsych import models

    collections = []
    monkeypatch.setattr(models.gc, "collect", lambda *args: collections.append(args) or 0)
    reader = Reader(str(tiny_models[family]), ReaderSettings(max_length=96, stride=24, question_tokens=24))
    reader.run(Document(id="d", text=TEXT), [Query("q1", "What methods were used?", 3, 8)])
    model = weakref.ref(reader.model)
    gc.disable()  # only reference counting may free it here
    try:
        reader.release()
        assert model() is None and collections == []
        reader.warm_up()
        kept = reader.model
        reader.release()
        assert collections == [()] and model() is None and kept is not None
    finally:
        gc.enable()


class _CountedText(str):
    """A paper's text that counts the slices taken of it: summing same texts takes one per candidate it looks at."""

    slices = 0

    def __getitem__(self, key):
        if isinstance(key, slice):
            _CountedText.slices += 1
        return super().__getitem__(key)


def test_summing_same_texts_looks_at_each_candidate_once(tiny_models, monkeypatch):
    """Where same texts are summed (the default), each batch's candidates are summed into the records kept, not every
    record again: that was quadratic in the paper's length (a 200-page thesis spent a third of its reading there)."""
    import mlpsych.reading.reader as reader_module
    from mlpsych.dev.tiny import corpus

    monkeypatch.setattr(reader_module, "CANDIDATES_KEPT", 8)  # pruned after every batch, as a long paper is
    reader = Reader(str(tiny_models["bert"]), ReaderSettings(max_length=96, stride=24, batch_size=4, dtype="fp32"))
    text = " ".join(corpus(60))

    def slices_taken(copies: int) -> tuple[int, int]:
        doc = Document(id=f"x{copies}", text=_CountedText(" ".join([text] * copies)))
        reader.encode(doc)
        before, windows = _CountedText.slices, reader.windows_read
        reader.run(doc, [Query("q1", "What methods were used?", top_k=5, max_answer_tokens=8)])
        return _CountedText.slices - before, reader.windows_read - windows

    (short, short_windows), (long, long_windows) = slices_taken(1), slices_taken(4)
    assert long_windows >= 4 * short_windows - 4
    assert long / short < 1.5 * long_windows / short_windows  # linear in the windows read, not quadratic
