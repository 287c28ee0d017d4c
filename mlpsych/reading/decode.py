"""SQuAD2 span decoding: one window's start/end logits to scored spans, and spans of all windows ranked together
with the no-answer option."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

# An answer is bounded in characters too: a tokenizer reads a run of text it cannot split (a 1 MB "word" from a
# broken PDF, a base64 blob) as one [UNK] token, which would make a one-token answer of the whole run. Real words
# are far shorter than this per token.
MAX_CHARS_PER_TOKEN = 40


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - (m + math.log(np.exp(x - m).sum()))


@dataclass
class WindowCandidate:
    """A span found in one window, before spans of all windows are ranked together."""

    char_start: int
    char_end: int
    score: float  # probability as a QA pipeline reports it: p(start) * p(end) within the window
    null_score: float  # p(no answer) in that window
    window: int
    rank: int = 0  # place among its window's candidates as decoded (best first where the search ranks them)


@dataclass
class _WindowScores:
    """One window's start/end log-probabilities over its context and the no-answer position."""

    log_start: np.ndarray
    log_end: np.ndarray
    null_score: float  # p(no answer)
    context: np.ndarray  # positions of the context tokens

    @classmethod
    def of(cls, start_logits: np.ndarray, end_logits: np.ndarray, context_mask: np.ndarray,
           null_index: int) -> "_WindowScores":
        allowed = context_mask.astype(bool).copy()
        allowed[null_index] = True
        log_start = _log_softmax(np.where(allowed, start_logits, -np.inf))
        log_end = _log_softmax(np.where(allowed, end_logits, -np.inf))
        return cls(log_start, log_end, float(math.exp(log_start[null_index] + log_end[null_index])),
                   np.flatnonzero(context_mask))


def _candidates(starts: np.ndarray, ends: np.ndarray, scores: np.ndarray, null_score: float,
                offsets: np.ndarray | Sequence[tuple[int, int]], max_answer_tokens: int, window: int,
                pieces: np.ndarray | None) -> list[WindowCandidate]:
    """The spans of tokens ``starts[i]..ends[i]`` (best first) as candidates, ranked in that order, less those that
    may not be one: a span that joins two passages of a packed window, covers no text, or is longer in characters
    than its tokens allow. Done on arrays: a window has dozens of spans, and this runs for every window read."""
    table = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    char_start, char_end = table[starts, 0], table[ends, 1]
    keep = (char_end > char_start) & (char_end - char_start <= max_answer_tokens * MAX_CHARS_PER_TOKEN)
    if pieces is not None:
        keep &= pieces[starts] == pieces[ends]
    kept = zip(char_start[keep].tolist(), char_end[keep].tolist(), np.asarray(scores)[keep].tolist())
    return [WindowCandidate(a, b, score, null_score, window, rank) for rank, (a, b, score) in enumerate(kept)]


def decode_window(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_mask: np.ndarray,
    offsets: Sequence[tuple[int, int]],
    *,
    n_best: int,
    max_answer_tokens: int,
    null_index: int = 0,
    window: int = 0,
    pieces: np.ndarray | None = None,
) -> tuple[list[WindowCandidate], float]:
    """SQuAD2 decoding of one window: top-n starts x top-n ends, inside the context, end >= start, length-bounded.

    Scores are normalized over the window (context tokens plus the no-answer position), so spans of different
    windows compare as the paper's pipeline compared them. In a window packed from passages, ``pieces`` gives
    each position's passage: a span must start and end in the same one (the text between two is not read).
    Returns the candidates and the window's null score.
    """
    scores = _WindowScores.of(start_logits, end_logits, context_mask, null_index)
    ctx = scores.context
    k = min(n_best, ctx.size)
    top_starts = ctx[np.argsort(-scores.log_start[ctx], kind="stable")[:k]]
    top_ends = ctx[np.argsort(-scores.log_end[ctx], kind="stable")[:k]]
    pairs = [(s, e) for s in top_starts for e in top_ends if s <= e and e - s + 1 <= max_answer_tokens]
    spans = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    probabilities = [math.exp(scores.log_start[s] + scores.log_end[e]) for s, e in pairs]
    return _candidates(spans[:, 0], spans[:, 1], np.array(probabilities, dtype=np.float64), scores.null_score,
                       offsets, max_answer_tokens, window, pieces), scores.null_score


def decode_window_exhaustive(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_mask: np.ndarray,
    offsets: Sequence[tuple[int, int]],
    *,
    top_k: int,
    max_answer_tokens: int,
    null_index: int = 0,
    window: int = 0,
    pieces: np.ndarray | None = None,
) -> tuple[list[WindowCandidate], float]:
    """The transformers question-answering pipeline's search in one window: the ``top_k`` best of every
    (start, end) pair of context tokens with ``0 <= end - start < max_answer_tokens``, scored as ``decode_window``
    scores (probabilities over the context and the no-answer position). Spans of zero probability are not kept.
    """
    scores = _WindowScores.of(start_logits, end_logits, context_mask, null_index)
    ctx = scores.context
    if ctx.size == 0:
        return [], scores.null_score
    p_start, p_end = np.exp(scores.log_start[ctx]), np.exp(scores.log_end[ctx])
    # Only the band of allowed lengths: band[s, d] is the span from s to s + d (zero past the context's end), in
    # the same (start, end) order as the whole start x end matrix, without its n x n cells.
    n, width = ctx.size, min(max_answer_tokens, ctx.size)
    ends = np.arange(n)[:, None] + np.arange(width)[None, :]
    band = np.where(ends < n, p_start[:, None] * p_end[np.minimum(ends, n - 1)], 0.0)
    flat = band.ravel()
    k = min(top_k, flat.size)
    best = np.argpartition(-flat, k - 1)[:k] if k < flat.size else np.arange(flat.size)
    best = best[np.argsort(-flat[best], kind="stable")]
    s, d = np.unravel_index(best, band.shape)
    probabilities = band[s, d]
    positive = probabilities > 0.0  # a zero is a place past the context's end
    s, d = s[positive], d[positive]
    return _candidates(ctx[s], ctx[s + d], probabilities[positive], scores.null_score, offsets, max_answer_tokens,
                       window, pieces), scores.null_score


def _pipeline_probabilities(logits: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """One window's start (or end) probabilities with the pipeline's float32 arithmetic, as a (1, n) row: logits
    outside ``allowed`` set to -10000, the maximum subtracted, exponentiated, divided by their sum. Near-equal spans
    keep the pipeline's order only if every rounding step is the same (float64 log-probabilities reorder spans a
    few float32 units apart)."""
    row = np.where(allowed, np.asarray(logits, dtype=np.float32), np.float32(-10000.0))[None, :]
    row = np.exp(row - row.max(axis=-1, keepdims=True))
    return row / row.sum()


def decode_window_pipeline(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_mask: np.ndarray,
    offsets: Sequence[tuple[int, int]],
    *,
    top_k: int,
    max_answer_tokens: int,
    null_index: int = 0,
    window: int = 0,
    pieces: np.ndarray | None = None,
) -> tuple[list[WindowCandidate], float]:
    """The exhaustive search computed as the transformers question-answering pipeline computes it, for a reading that
    must give its lists span for span: float32 probabilities (``_pipeline_probabilities``), the no-answer position's
    set to zero after the null score is taken, every (start, end) product of the whole window in a square (zero
    where the end is before the start or the span is longer than ``max_answer_tokens``), and numpy's partial
    selection of the ``top_k`` largest of that square read row by row, then sorted by numpy's default sort. Spans of
    equal float32 score at the cut, or within the window's list, are then chosen and ordered as the pipeline's
    (the same arrays through the same numpy calls); ``decode_window_exhaustive``'s smaller band layout would pick
    among them otherwise. Spans of zero probability (outside the context) are not kept."""
    allowed = np.asarray(context_mask, dtype=bool).copy()
    allowed[null_index] = True
    p_start = _pipeline_probabilities(start_logits, allowed)
    p_end = _pipeline_probabilities(end_logits, allowed)
    null_score = float(p_start[0, null_index] * p_end[0, null_index])
    p_start[0, null_index] = p_end[0, null_index] = 0.0
    square = np.tril(np.triu(np.matmul(p_start[:, :, None], p_end[:, None, :])), max_answer_tokens - 1)[0]
    flat = square.ravel()
    if top_k == 1:
        best = np.array([np.argmax(flat)])
    elif flat.size < top_k:
        best = np.argsort(-flat)
    else:
        best = np.argpartition(-flat, top_k)[:top_k]
        best = best[np.argsort(-flat[best])]
    s, e = np.unravel_index(best, square.shape)
    probabilities = square[s, e]
    context = np.asarray(context_mask, dtype=bool)
    keep = (probabilities > 0.0) & context[s] & context[e]
    return _candidates(s[keep], e[keep], probabilities[keep], null_score, offsets, max_answer_tokens, window,
                       pieces), null_score


def rank_candidates(
    candidates: list[WindowCandidate],
    null_scores: list[float],
    *,
    top_k: int,
    allow_empty: bool,
    null_threshold: float = 0.0,
    dedupe: bool = True,
) -> list[WindowCandidate]:
    """Spans of all windows ranked together; with ``dedupe`` a span read in two overlapping windows counts once
    (best score), without it each window's find is kept, as the transformers pipeline keeps them.

    For a question that may have no answer, the no-answer option competes as in SQuAD2: its score is the
    lowest null score over the windows, and only spans above it (plus ``null_threshold``) are kept.
    """
    if dedupe:
        best: dict[tuple[int, int], WindowCandidate] = {}
        for c in candidates:
            key = (c.char_start, c.char_end)
            if key not in best or c.score > best[key].score:
                best[key] = c
        candidates = list(best.values())
    ranked = sorted(candidates, key=lambda c: (-c.score, c.window, c.rank))  # ties in reading order, as the pipeline
    if allow_empty and null_scores:
        floor = min(null_scores) + null_threshold
        ranked = [c for c in ranked if c.score > floor]
    return ranked[:top_k]


def window_candidates(top_k: int, same_text: str, snap_to_words: bool) -> int:
    """Candidates searched per window for a question's ``top_k``: transformers 4.57's pipeline takes ``2 * top_k +
    10`` when it snaps spans to words (several token pairs snap to one span, and summing same texts then needs them),
    4.40's ``top_k``, which is all the ranked top k can use when nothing is summed."""
    return 2 * top_k + 10 if same_text == "summed" and snap_to_words else top_k


def _reading_order(c: WindowCandidate) -> tuple[int, int]:
    return c.window, c.rank


def add_summed(sums: dict[str, WindowCandidate], candidates: list[WindowCandidate],
               text: str) -> dict[str, WindowCandidate]:
    """``sums`` with ``candidates`` summed in: candidates of one question with the same text, ignoring case, made
    one record, as transformers 4.57's question-answering pipeline does: its score the sum of theirs, its offsets
    the first one's in reading order (window, then place in the window). Summing in steps gives the same as summing
    all at once, so a question's candidates are summed as windows are read; only the texts the new candidates name
    are touched (summing every record again at each batch made reading quadratic in a paper's length: a 200-page
    thesis spent a third of its reading time there)."""
    groups: dict[str, list[WindowCandidate]] = {}
    for c in sorted(candidates, key=_reading_order):
        groups.setdefault(text[c.char_start : c.char_end].lower(), []).append(c)
    for key, group in groups.items():
        if key in sums:
            group = sorted([sums[key], *group], key=_reading_order)
        first, total = group[0], group[0].score
        for c in group[1:]:
            total += c.score
        # a text found once keeps its record: most are, and copying each at every pruning was a GPU run's hot spot
        sums[key] = first if total == first.score else replace(first, score=total)
    return sums
