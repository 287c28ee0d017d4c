"""Similar Match's similarity: the cosine of two answers' embeddings, each distinct answer embedded once.

:func:`mlpsych.evaluation.evaluate.evaluate` hands :meth:`EmbeddingSimilarity.prepare` the answers its items
compare (not every answer of the run: a paper without gold, or the extractive answers a normalized list replaces,
is never compared), so they are embedded in one pass of length-sorted batches; an item's pairs are then one
matrix product. A pair whose product lies near the threshold is decided by the per-pair dot product the scores
were always computed with, so a rounding difference of the matrix product never flips a match.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

# Matrix-product cosines this close to the threshold are recomputed pair by pair (float32 rounding is ~1e-7).
NEAR_THRESHOLD = 1e-4


class EmbeddingSimilarity:
    """Cosine similarity of answers by an embedder's L2-normalized vectors (``embedder.encode``)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self._index: dict[str, int] = {}
        self._vectors = np.zeros((0, 0), dtype=np.float32)

    def prepare(self, texts: Iterable[str]) -> None:
        """Embed the texts not embedded yet, in one call (the embedder batches them by length)."""
        ordered = sorted({text for text in texts if text not in self._index})
        if not ordered:
            return
        vectors = self.embedder.encode(ordered)
        base = len(self._index)
        self._vectors = vectors if base == 0 else np.concatenate([self._vectors, vectors])
        self._index.update((text, base + i) for i, text in enumerate(ordered))

    def __call__(self, a: str, b: str) -> float:
        if a in self._index and b in self._index:
            return float(np.dot(self._vectors[self._index[a]], self._vectors[self._index[b]]))
        return float(np.dot(*self.embedder.encode([a, b])))

    def matches(self, gold: Sequence[str], preds: Sequence[str], threshold: float) -> list[bool]:
        """Per gold answer, whether some prediction's cosine exceeds ``threshold`` (as ``self(g, p) > threshold``)."""
        if not preds:
            return [False] * len(gold)
        rows = [self._index.get(text) for text in gold]
        columns = [self._index.get(text) for text in preds]
        if None in rows or None in columns:  # not prepared: pair by pair, embedding on demand
            return [any(self(g, p) > threshold for p in preds) for g in gold]
        cosines = self._vectors[rows] @ self._vectors[columns].T
        hits = cosines > threshold
        for i, j in zip(*np.nonzero(np.abs(cosines - threshold) < NEAR_THRESHOLD)):
            hits[i, j] = float(np.dot(self._vectors[rows[i]], self._vectors[columns[j]])) > threshold
        return hits.any(axis=1).tolist()
