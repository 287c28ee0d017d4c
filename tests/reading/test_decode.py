"""Span decoding on hand-made logits: null answers, max length, context-only spans, spans across windows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlpsych.reading.decode import (
    MAX_CHARS_PER_TOKEN,
    WindowCandidate,
    add_summed,
    decode_window,
    rank_candidates,
    window_candidates,
)
from mlpsych.reading.windows import make_windows, pack_passages

NEG = -20.0


def _logits(n: int, peaks: dict[int, float]) -> np.ndarray:
    x = np.full(n, NEG)
    for i, v in peaks.items():
        x[i] = v
    return x


# Sequence: [CLS] q q [SEP] c c c c c [SEP]; context tokens are positions 4..8, each 2 chars wide.
CONTEXT = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0], dtype=bool)
OFFSETS = [(0, 0)] * 4 + [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14)] + [(0, 0)]


def test_best_span_and_probability():
    start = _logits(10, {5: 10.0})
    end = _logits(10, {6: 10.0})
    found, null = decode_window(start, end, CONTEXT, OFFSETS, n_best=3, max_answer_tokens=5)
    best = max(found, key=lambda c: c.score)
    assert (best.char_start, best.char_end) == (3, 8)
    assert best.score == pytest.approx(1.0, abs=1e-6)
    assert null == pytest.approx(math.exp(2 * (NEG - 10.0)), rel=1e-3)


def test_spans_never_leave_the_context():
    # The highest logits sit on the question tokens; they must not become answers.
    start = _logits(10, {1: 30.0, 4: 5.0})
    end = _logits(10, {2: 30.0, 4: 5.0})
    found, _ = decode_window(start, end, CONTEXT, OFFSETS, n_best=10, max_answer_tokens=5)
    assert found
    assert all(c.char_start >= 0 and (c.char_start, c.char_end) in {(a, b) for a, _ in OFFSETS[4:9] for _, b in OFFSETS[4:9]} for c in found)
    assert all(c.char_end > c.char_start for c in found)


def test_end_before_start_and_max_length_rejected():
    start = _logits(10, {8: 10.0, 4: 9.0})
    end = _logits(10, {4: 10.0, 8: 9.0})
    found, _ = decode_window(start, end, CONTEXT, OFFSETS, n_best=2, max_answer_tokens=3)
    spans = {(c.char_start, c.char_end) for c in found}
    assert (12, 2) not in spans  # end before start
    assert (0, 14) not in spans  # 5 tokens > max 3
    assert spans == {(12, 14), (0, 2)}


def test_a_token_that_covers_a_huge_run_of_text_is_no_answer():
    """One [UNK] token standing for a 1 MB word without spaces would make a one-token answer of all of it."""
    offsets = OFFSETS[:4] + [(0, 2), (3, 1_000_003), (1_000_004, 1_000_006), (1_000_007, 1_000_009),
                             (1_000_010, 1_000_012)] + [(0, 0)]
    start = _logits(10, {5: 10.0, 6: 8.0})
    end = _logits(10, {5: 10.0, 6: 8.0})
    found, _ = decode_window(start, end, CONTEXT, offsets, n_best=3, max_answer_tokens=30)
    assert found and all(c.char_end - c.char_start <= 30 * MAX_CHARS_PER_TOKEN for c in found)
    assert (1_000_004, 1_000_006) in {(c.char_start, c.char_end) for c in found}  # the next token is still an answer


def test_null_answer_wins_for_may_be_empty_questions():
    # Window strongly predicts "no answer" (CLS); the only span is weak.
    start = _logits(10, {0: 10.0, 5: 1.0})
    end = _logits(10, {0: 10.0, 5: 1.0})
    found, null = decode_window(start, end, CONTEXT, OFFSETS, n_best=3, max_answer_tokens=5)
    assert null > max(c.score for c in found)
    assert rank_candidates(found, [null], top_k=5, allow_empty=True) == []
    # The same window for a question that always has answers keeps the top spans.
    assert rank_candidates(found, [null], top_k=1, allow_empty=False)[0].char_start == 3


def test_null_floor_is_the_lowest_null_over_windows():
    # Window 0 has no answer (null high); window 1 has a confident answer (null low): the span survives.
    a = WindowCandidate(10, 20, score=0.6, null_score=0.01, window=1)
    b = WindowCandidate(30, 35, score=0.05, null_score=0.9, window=0)
    kept = rank_candidates([a, b], [0.9, 0.01], top_k=5, allow_empty=True)
    assert kept == [a, b]
    kept = rank_candidates([a, b], [0.9, 0.1], top_k=5, allow_empty=True)
    assert kept == [a]


def test_span_seen_in_two_overlapping_windows_counts_once_with_best_score():
    one = WindowCandidate(100, 120, score=0.3, null_score=0.1, window=0)
    two = WindowCandidate(100, 120, score=0.7, null_score=0.1, window=1)
    other = WindowCandidate(5, 9, score=0.5, null_score=0.1, window=0)
    ranked = rank_candidates([one, other, two], [0.1, 0.1], top_k=5, allow_empty=False)
    assert [(c.char_start, c.score) for c in ranked] == [(100, 0.7), (5, 0.5)]


def test_top_k_cuts_after_ranking_all_windows():
    cands = [WindowCandidate(i, i + 1, score=s, null_score=0.0, window=i % 3) for i, s in enumerate([0.1, 0.9, 0.5, 0.7])]
    assert [c.char_start for c in rank_candidates(cands, [0.0], top_k=2, allow_empty=False)] == [1, 3]


def test_ties_rank_in_reading_order():
    cands = [WindowCandidate(50, 55, 0.5, 0.0, window=2, rank=0), WindowCandidate(10, 15, 0.5, 0.0, window=1, rank=3),
             WindowCandidate(20, 25, 0.5, 0.0, window=1, rank=1)]
    assert [c.char_start for c in rank_candidates(cands, [], top_k=3, allow_empty=False, dedupe=False)] == [20, 10, 50]


# -- same texts summed (transformers 4.57's question-answering pipeline) -----------------------------------

SAME = "We used SVM. Then svm again, and SVM once more; random forest too."


def _at(piece: str, occurrence: int, score: float, window: int, rank: int) -> WindowCandidate:
    start = -1
    for _ in range(occurrence + 1):
        start = SAME.lower().index(piece.lower(), start + 1)
    return WindowCandidate(start, start + len(piece), score, 0.0, window, rank)


def test_same_texts_are_one_span_with_the_summed_score_and_the_first_offsets_in_reading_order():
    late = _at("SVM", 2, 0.25, window=1, rank=0)  # best score, but read after the others
    first = _at("SVM", 0, 0.125, window=0, rank=3)
    lower = _at("svm", 1, 0.0625, window=0, rank=5)  # the same text ignoring case
    snapped_twice = _at("SVM", 0, 0.03125, window=0, rank=4)  # two token pairs snapped to the same words
    forest = _at("random forest", 0, 0.3, window=1, rank=1)
    summed = list(add_summed({}, [late, forest, lower, first, snapped_twice], SAME).values())
    assert [(SAME[c.char_start:c.char_end], c.score) for c in summed] == [("SVM", 0.46875), ("random forest", 0.3)]
    assert (summed[0].char_start, summed[0].window, summed[0].rank) == (first.char_start, 0, 3)
    ranked = rank_candidates(summed, [], top_k=1, allow_empty=False, dedupe=False)
    assert ranked[0].score == 0.46875  # the sum beats the single best span


def test_summing_as_windows_are_read_gives_the_sum_of_all():
    parts = [_at("SVM", 2, 0.25, 2, 0), _at("random forest", 0, 0.5, 0, 1), _at("SVM", 0, 0.125, 1, 0),
             _at("svm", 1, 0.0625, 0, 2)]
    at_once = add_summed({}, parts, SAME).values()
    in_steps = add_summed(add_summed({}, parts[:2], SAME), parts[2:], SAME).values()
    assert sorted((c.char_start, c.score) for c in in_steps) == sorted((c.char_start, c.score) for c in at_once)


def test_candidates_searched_per_window():
    assert window_candidates(30, "summed", True) == 70  # the pipeline's 2 * top_k + 10 when it snaps to words
    assert window_candidates(30, "summed", False) == 30
    assert window_candidates(30, "kept", True) == 30


def test_windows_overlap_by_stride_and_cover_everything():
    offsets = [(i * 3, i * 3 + 2) for i in range(25)]
    windows = make_windows(offsets, context_tokens=10, stride=4)
    assert [(w.token_start, w.token_end) for w in windows] == [(0, 10), (6, 16), (12, 22), (18, 25)]
    assert windows[1].char_start == 18 and windows[-1].char_end == 74
    with pytest.raises(ValueError):
        make_windows(offsets, context_tokens=4, stride=4)
    assert make_windows([], context_tokens=10, stride=4) == []


def test_a_span_of_a_packed_window_stays_inside_one_passage():
    # Positions 4-5 come from one passage, 6-8 from another (text between them was not read).
    pieces = np.array([-1, -1, -1, -1, 0, 0, 1, 1, 1, -1])
    start = _logits(10, {5: 10.0, 6: 9.0})
    end = _logits(10, {6: 10.0, 5: 9.0})
    found, _ = decode_window(start, end, CONTEXT, OFFSETS, n_best=2, max_answer_tokens=5, pieces=pieces)
    spans = {(c.char_start, c.char_end) for c in found}
    assert (3, 8) not in spans  # would join the two passages
    assert spans == {(3, 5), (6, 8)}
    unpacked, _ = decode_window(start, end, CONTEXT, OFFSETS, n_best=2, max_answer_tokens=5)
    assert (3, 8) in {(c.char_start, c.char_end) for c in unpacked}


def test_passages_are_packed_in_paper_order_without_splitting_them():
    offsets = [(i * 10, i * 10 + 5) for i in range(100)]  # token i covers chars [10 i, 10 i + 5)
    # Tokens 0-9, 10-29 (touching: one piece), 50-59, 60-61 (touching), 90-99; capacity 25.
    passages = [(900, 1000), (0, 100), (100, 300), (500, 600), (600, 615)]
    windows = pack_passages(offsets, passages, capacity=25, stride=5)
    assert [w.pieces for w in windows] == [((0, 25),), ((20, 30), (50, 62)), ((90, 100),)]
    assert all(sum(b - a for a, b in w.pieces) <= 25 for w in windows)
    assert (windows[1].char_start, windows[1].char_end) == (200, 615)
    # Every token of every passage is read.
    read = {t for w in windows for a, b in w.pieces for t in range(a, b)}
    assert read == set(range(0, 30)) | set(range(50, 62)) | set(range(90, 100))
    assert pack_passages(offsets, [], capacity=25, stride=5) == []
    with pytest.raises(ValueError):
        pack_passages(offsets, passages, capacity=5, stride=5)
