"""Windows over a tokenized paper: overlapping windows of the whole paper, or windows packed from the passages
retrieval chose. Token ranges only: the reader pairs them with a question and reads them."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator, Sequence

import numpy as np


@dataclass
class Window:
    """A run of document tokens ``[token_start, token_end)`` covering ``[char_start, char_end)``, or, for a window
    packed from passages, the token ranges ``pieces`` within those bounds, read one after the other."""

    index: int
    token_start: int
    token_end: int
    char_start: int
    char_end: int
    pieces: tuple[tuple[int, int], ...] = ()

    @property
    def token_ranges(self) -> tuple[tuple[int, int], ...]:
        return self.pieces or ((self.token_start, self.token_end),)


@dataclass
class EncodedDocument:
    """A paper tokenized once: token ids, their char offsets and their words, and its windows."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    windows: list[Window] = field(default_factory=list)
    # For spans snapped to words: each token's word as the indices of its first and last token, an (n, 2) array
    # (None: not kept).
    word_tokens: np.ndarray | None = None
    _layouts: dict[tuple[int, int], list[Window]] = field(default_factory=dict, repr=False)
    # ``offsets`` as an (n, 2) array, for the lookups of every window read: made with the paper's tokens, so reading
    # a window adds nothing that grows with the paper
    offset_table: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.offset_table = np.asarray(self.offsets, dtype=np.int64).reshape(-1, 2)

    def windows_for(self, context_tokens: int, stride: int) -> list[Window]:
        """Windows of another context size (a question laid out with its own length), made once per size."""
        key = (context_tokens, stride)
        if key not in self._layouts:
            self._layouts[key] = make_windows(self.offsets, context_tokens, stride)
        return self._layouts[key]

    @cached_property
    def starts(self) -> list[int]:
        """Each token's first char: where a passage's tokens are looked up (many times while packing)."""
        return [a for a, _ in self.offsets]


def _step(size: int, stride: int) -> int:
    """Tokens between the starts of consecutive parts of ``size`` tokens that share ``stride`` tokens."""
    if stride >= size:
        raise ValueError(f"stride ({stride}) must be smaller than the window's context ({size} tokens)")
    return size - stride


def _cut(first: int, last: int, size: int, step: int) -> Iterator[tuple[int, int]]:
    """Tokens ``[first, last)`` in parts of at most ``size`` tokens, each starting ``step`` after the previous."""
    while True:
        end = min(first + size, last)
        yield first, end
        if end >= last:
            return
        first += step


def make_windows(offsets: Sequence[tuple[int, int]], context_tokens: int, stride: int) -> list[Window]:
    """Overlapping windows of ``context_tokens`` tokens; consecutive windows share ``stride`` tokens."""
    if not offsets:
        return []
    step = _step(context_tokens, stride)
    return [Window(i, start, end, offsets[start][0], offsets[end - 1][1])
            for i, (start, end) in enumerate(_cut(0, len(offsets), context_tokens, step))]


def pack_passages(offsets: Sequence[tuple[int, int]], passages: Sequence[tuple[int, int]], capacity: int,
                  stride: int, starts: Sequence[int] | None = None) -> list[Window]:
    """Windows holding the tokens of the given char ranges, in paper order, at most ``capacity`` tokens each.

    Retrieval by sentence reads a paper's best sentences, not its best windows: the sentences naming methods are
    spread over the paper, and whole windows around them are mostly other text. Touching or overlapping ranges
    become one piece; a piece is never split between windows unless it is longer than a window, when it is cut
    like a paper (consecutive parts share ``stride`` tokens). ``starts``: the tokens' first chars, if known.
    """
    step = _step(capacity, stride)
    starts = starts if starts is not None else [a for a, _ in offsets]
    merged: list[list[int]] = []
    for a, b in sorted(passages):
        first, last = bisect.bisect_left(starts, a), bisect.bisect_left(starts, b)
        if last <= first:
            continue
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    pieces = [piece for first, last in merged for piece in _cut(first, last, capacity, step)]
    packed: list[list[tuple[int, int]]] = []
    used = capacity
    for piece in pieces:
        if used + piece[1] - piece[0] > capacity:
            packed.append([])
            used = 0
        packed[-1].append(piece)
        used += piece[1] - piece[0]
    return [Window(i, p[0][0], p[-1][1], offsets[p[0][0]][0], offsets[p[-1][1] - 1][1], tuple(p))
            for i, p in enumerate(packed)]
