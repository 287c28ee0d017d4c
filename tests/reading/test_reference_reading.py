"""The reader in the reference preset's settings reads as the transformers question-answering pipeline does: the
same model inputs as the tokenizer's own question/context windows, spans snapped to its words, every pair searched,
same texts summed (transformers 4.57) or kept (4.40). (The pipeline itself runs in benchmarks/reference_equivalence.py, in a transformers 4 venv.)"""

from __future__ import annotations

import numpy as np
import pytest

from mlpsych.documents import Document
from mlpsych.reading.decode import decode_window_exhaustive, decode_window_pipeline
from mlpsych.reading.reader import Query, Reader, _word_tokens, context_layout
from mlpsych.settings import PRESETS, ReaderSettings

TEXT = " ".join(
    f"In study {i}, participants (N = {100 + i}) were classified with random-forests (RF) and support vector "
    f"machines;  the models were fitted in R with the caret package." for i in range(12)
)
QUESTION = "What machine learning or natural language processing techniques were used?"
FAMILIES = ["deberta-v2", "albert", "electra", "roberta", "bert"]


def reference_reader(path, **changes) -> Reader:
    settings = {**PRESETS["reference"].settings["reader"], "max_length": 64, "stride": 16, "batch_size": 3, **changes}
    return Reader(str(path), ReaderSettings(**settings))


@pytest.mark.parametrize("family", FAMILIES)
def test_model_inputs_are_the_tokenizers_question_context_windows(tiny_models, family):
    reader = reference_reader(tiny_models[family])
    reader.load_tokenizer()
    doc = Document(id="d", text=TEXT)
    expected = reader.tokenizer(QUESTION, TEXT, truncation="only_second", max_length=64, stride=16,
                                return_overflowing_tokens=True)["input_ids"]
    features = reader._features([(doc, [Query("q1", QUESTION, 30, 15)])])
    built = [reader._build(reader.encode(doc), f).ids for f in features]
    assert built == expected
    # the shared layout (mlpsych's default) reads other windows: this test would catch a preset that lost it. Its
    # room for the question is made shorter than any tokenizer's question: at 24 tokens, another sentencepiece's
    # tiny vocabularies (the device machine's) cut the same windows as the reference layout.
    shared = Reader(str(tiny_models[family]), ReaderSettings(max_length=64, stride=16, layout="shared",
                                                             question_tokens=2))
    shared.load_tokenizer()
    features = shared._features([(doc, [Query("q1", QUESTION, 30, 15)])])
    assert [shared._build(shared.encode(doc), f).ids for f in features] != expected


@pytest.mark.parametrize("family", ["deberta-v2", "bert"])
def test_spans_are_snapped_to_the_tokenizers_words(tiny_models, family):
    reader = reference_reader(tiny_models[family])
    doc = Document(id="d", text=TEXT)
    spans = reader.run(doc, [Query("q1", QUESTION, 30, 15)])[0]
    enc = reader.tokenizer(TEXT, add_special_tokens=False, return_offsets_mapping=True)
    words = {enc.word_to_chars(w) for w in set(enc.word_ids()) if w is not None}
    starts, ends = {w.start for w in words}, {w.end for w in words}
    # a word cut by a window boundary ends (or starts) there, as the pipeline sees it
    encoded = reader.encode(doc)
    size = reader.max_length - reader._template.special_count - len(reader._question_ids(QUESTION))
    for window in encoded.windows_for(size, reader.settings.stride):
        starts.add(encoded.offsets[window.token_start][0])
        ends.add(encoded.offsets[window.token_end - 1][1])
    assert len(spans) == 30
    assert all(s.start in starts and s.end in ends for s in spans)
    unsnapped = reference_reader(tiny_models[family], snap_to_words=False).run(doc, [Query("q1", QUESTION, 30, 15)])[0]
    assert [(s.start, s.end) for s in spans] != [(s.start, s.end) for s in unsnapped]


def test_each_token_knows_its_words_first_and_last_token():
    # a token outside any word (None) is alone; a word's tokens need not be next to each other
    assert _word_tokens([None, 0, 0, 1, None, 1, 2]).tolist() == [[0, 0], [1, 2], [1, 2], [3, 5], [4, 4], [3, 5],
                                                                   [6, 6]]
    assert _word_tokens([]).tolist() == [] and _word_tokens([None, None]).tolist() == [[0, 0], [1, 1]]


def test_a_word_cut_by_the_window_is_snapped_to_its_part_inside():
    # "SentiWordNet" as three tokens of one word; the window starts at "Word"
    offsets = [(0, 2), (3, 8), (8, 12), (12, 15), (16, 20)]
    word_tokens = [(0, 0), (1, 3), (1, 3), (1, 3), (4, 4)]
    mask, spans, _ = context_layout(1, [(2, 5)], offsets, 5, word_tokens)
    assert spans.tolist() == [[0, 0], [8, 15], [8, 15], [16, 20], [0, 0]]
    assert context_layout(1, [(0, 5)], offsets, 7, word_tokens)[1][1:6].tolist() == [
        [0, 2], [3, 15], [3, 15], [3, 15], [16, 20]]
    assert context_layout(1, [(2, 5)], offsets, 5)[1].tolist() == [[0, 0], [8, 12], [12, 15], [16, 20], [0, 0]]


def test_a_packed_window_maps_each_passage_to_its_own_tokens():
    # two passages, tokens 0-1 and 3-4, after one question token; the word of tokens 1-3 is cut by both bounds
    offsets = [(0, 2), (3, 8), (8, 12), (12, 15), (16, 20)]
    word_tokens = [(0, 0), (1, 3), (1, 3), (1, 3), (4, 4)]
    mask, spans, pieces = context_layout(1, [(0, 2), (3, 5)], offsets, 7, word_tokens)
    assert spans.tolist() == [[0, 0], [0, 2], [3, 8], [12, 15], [16, 20], [0, 0], [0, 0]]
    assert mask.tolist() == [False, True, True, True, True, False, False]
    assert pieces.tolist() == [-1, 0, 0, 1, 1, -1, -1]


def test_duplicates_from_overlapping_windows_are_kept_and_the_length_bound_is_the_settings(tiny_models):
    doc = Document(id="d", text=TEXT)
    kept = reference_reader(tiny_models["bert"], same_text="kept").run(doc, [Query("q1", QUESTION, 200, 15)])[0]
    keys = [(s.start, s.end) for s in kept]
    assert len(set(keys)) < len(keys)  # the same span found in two windows, twice
    deduped = reference_reader(tiny_models["bert"], same_text="kept", dedupe=True).run(
        doc, [Query("q1", QUESTION, 200, 15)])[0]
    assert len({(s.start, s.end) for s in deduped}) == len(deduped)


def test_same_texts_are_summed_into_one_span_as_the_pipeline_of_the_released_answers(tiny_models):
    doc = Document(id="d", text=TEXT)
    summed = reference_reader(tiny_models["bert"]).run(doc, [Query("q1", QUESTION, 30, 15)])[0]
    kept = reference_reader(tiny_models["bert"], same_text="kept").run(doc, [Query("q1", QUESTION, 200, 15)])[0]
    assert len(summed) == 30 and len({s.text.lower() for s in summed}) == 30
    best_kept: dict[str, float] = {}
    for s in kept:
        best_kept[s.text.lower()] = max(best_kept.get(s.text.lower(), 0.0), s.score)
    assert all(s.score >= best_kept.get(s.text.lower(), 0.0) - 1e-9 for s in summed)
    assert any(s.score > best_kept.get(s.text.lower(), 0.0) * 1.5 for s in summed)  # found more than once
    assert all(doc.text[s.start : s.end] == s.text for s in summed)


def test_blank_tokens_are_kept_in_the_input(tiny_models):
    text = "We used SVM ,  random forest ( RF ) and R ."
    doc = Document(id="d", text=text)
    dropped = Reader(str(tiny_models["deberta-v2"]), ReaderSettings(keep_blank_tokens=False)).encode(doc)
    reader = reference_reader(tiny_models["deberta-v2"])
    kept = reader.encode(doc)
    assert kept.ids == reader.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(dropped.ids) < len(kept.ids)  # the bare "▁" pieces before punctuation


def test_exhaustive_search_is_the_best_pairs_in_the_length_band():
    rng = np.random.default_rng(3)
    n, band, k = 40, 5, 12
    starts, ends = rng.normal(size=n), rng.normal(size=n)
    mask = np.zeros(n, dtype=bool)
    mask[6:38] = True  # question tokens before, a separator after
    offsets = [(10 * i, 10 * i + 5) for i in range(n)]
    found, null = decode_window_exhaustive(starts, ends, mask, offsets, top_k=k, max_answer_tokens=band)
    allowed = mask.copy()
    allowed[0] = True
    p_start = np.exp(starts - starts[allowed].max()) * allowed
    p_start /= p_start.sum()
    p_end = np.exp(ends - ends[allowed].max()) * allowed
    p_end /= p_end.sum()
    pairs = sorted(((p_start[s] * p_end[e], s, e) for s in range(6, 38) for e in range(s, min(s + band, 38))),
                   reverse=True)[:k]
    assert [(c.char_start, c.char_end) for c in found] == [(offsets[s][0], offsets[e][1]) for _, s, e in pairs]
    assert [c.score for c in found] == pytest.approx([p for p, _, _ in pairs], rel=1e-6)
    assert null == pytest.approx(p_start[0] * p_end[0], rel=1e-6)


# A window of ten positions as the pipeline sees one: [CLS], three question and separator tokens, five context
# tokens, a separator. Logits are hand-written; the expected spans and scores are what transformers 4.57.1's
# question-answering pipeline selects from them (its span selection run on these logits, max_answer_len 3).
WINDOW_MASK = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0], dtype=bool)
WINDOW_OFFSETS = [(10 * i, 10 * i + 5) for i in range(10)]


def _pipeline_spans(start, end, top_k):
    found, _ = decode_window_pipeline(np.array(start, dtype=np.float32), np.array(end, dtype=np.float32),
                                      WINDOW_MASK, WINDOW_OFFSETS, top_k=top_k, max_answer_tokens=3)
    return [(c.char_start // 10, (c.char_end - 5) // 10) for c in found], [c.score for c in found]


def test_the_pipeline_search_cuts_between_equal_spans_by_its_float32_rounding():
    """Spans (7, 7) and (8, 8) score the same in exact arithmetic (0.6 + 1.0 = 0.2 + 1.4 in logits); the pipeline's
    float32 probabilities put (7, 7) above, so it is the third of the top 3 (float64 log-probabilities keep (8, 8)):
    in the DeBERTa-v2 reading of a development paper this decided which of two spans made a window's 70."""
    spans, scores = _pipeline_spans([0.2, 0, 0, 0, 1.3, -1.0, -0.4, 0.6, 0.2, 0],
                                    [1.3, 0, 0, 0, -1.7, -1.9, 1.5, 1.0, 1.4, 0], top_k=3)
    assert spans == [(4, 6), (7, 8), (7, 7)]
    assert scores == [0.12013062834739685, 0.053978171199560165, 0.036182649433612823]


def test_the_pipeline_search_orders_equal_spans_by_its_float32_rounding():
    """(5, 6) and (8, 8) tie in exact arithmetic (0.1 + 0.0 = -0.8 + 0.9); in float32 (5, 6) is the larger, so it
    comes first in the window's list (the order that decides whose offsets a summed text keeps)."""
    spans, scores = _pipeline_spans([-0.4, 0, 0, 0, -0.3, 0.1, 0.9, -0.9, -0.8, 0],
                                    [0.4, 0, 0, 0, 0.0, 0.1, 0.0, -1.0, 0.9, 0], top_k=5)
    assert spans == [(6, 8), (6, 6), (5, 5), (5, 6), (8, 8)]
    assert scores == [0.13972067832946777, 0.05680619180202484, 0.02820912003517151, 0.025524670258164406,
                      0.025524664670228958]


def test_the_pipeline_search_keeps_only_context_spans_of_the_allowed_lengths():
    """Asked for more spans than the window has, it returns every context span of 1-3 tokens, best first, and the
    null score is the no-answer position's start x end probability."""
    start, end = [0.5, 2.0, 2.0, 0, 0.3, -0.2, 0.1, 0.4, -0.5, 3.0], [0.1, 2.0, 0, 2.0, -0.3, 0.2, 0.6, 0.0, 0.2, 3.0]
    found, null = decode_window_pipeline(np.array(start, dtype=np.float32), np.array(end, dtype=np.float32),
                                         WINDOW_MASK, WINDOW_OFFSETS, top_k=20, max_answer_tokens=3)
    spans = [(c.char_start // 10, (c.char_end - 5) // 10) for c in found]
    assert sorted(spans) == [(s, e) for s in range(4, 9) for e in range(s, min(s + 3, 9))]
    assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)
    allowed = [0, 4, 5, 6, 7, 8]
    p_start = np.exp(np.array(start)[allowed]) / np.exp(np.array(start)[allowed]).sum()
    p_end = np.exp(np.array(end)[allowed]) / np.exp(np.array(end)[allowed]).sum()
    assert null == pytest.approx(p_start[0] * p_end[0], rel=1e-6)


@pytest.mark.parametrize("family", ["albert", "bert"])
def test_a_read_restricted_to_shared_windows_fits_a_long_question(tiny_models, family):
    """Retrieval picks windows of the shared layout; read with a long question they borrow from the overlap
    rather than overflow the model's positions (found by the app test: ALBERT failed on a long sub-question)."""
    reader = Reader(str(tiny_models[family]), ReaderSettings(max_length=64, stride=16, question_tokens=8))
    doc = Document(id="d", text=TEXT)
    long_question = "What was " + "with a mean correlation of r = .46 (95% CI [.37, .54]) " * 3 + "used for?"
    features = reader._features([(doc, [Query("q4", long_question, 5, 15, windows=(0, 1, 2))])])
    built = [reader._build(reader.encode(doc), f).ids for f in features]
    assert len(built) == 3 and max(len(ids) for ids in built) <= 64
    assert reader.run(doc, [Query("q4", long_question, 5, 15, windows=(0, 1, 2))])[0]
