"""The rule that picks the fast preset's point on the cost/coverage trade-off, stated before any figure is read.

``benchmarks/cascade_retrieval.py`` scores every configuration of the cascade on the development papers (coverage
of the full read's gold spans per question, FLOPs of both readers) and applies this rule on some papers to measure
its choice on others; ``settings.FAST_CASCADE`` is its choice on all of them. ``choose_by_answers`` then
picks the point's mass by answers as well as coverage (``benchmarks/answer_quality.py --masses``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def choose_point(coverage: np.ndarray, cost: np.ndarray, targets: np.ndarray) -> int:
    """Index of the configuration to use: the cheapest whose coverage reaches every question's target; if none
    does, the one whose worst question falls least short of its target, then the cheaper (first on full ties).

    ``coverage``: ``[configuration, question]``; ``cost``: ``[configuration]``; ``targets``: ``[question]``.
    """
    short = (np.asarray(coverage, dtype=float) - np.asarray(targets, dtype=float)).min(axis=1)
    meets = short >= 0
    return int(np.lexsort((np.asarray(cost, dtype=float), -np.where(meets, 0.0, short), ~meets))[0])


def choose_by_answers(masses: Sequence[float], cost: Sequence[float], f1: np.ndarray, reference: Sequence[float],
                      tolerance: Sequence[float], coverage: np.ndarray, floor: float, fallback: float) -> float:
    """The cascade's mass by answers as well as coverage: the cheapest mass whose answer F1 is within ``tolerance``
    of its question's ``reference`` (today's point for some questions, the full read for others) on every question
    and whose gold-span coverage reaches ``floor`` on every question; ties go to the higher mass; ``fallback``
    (today's mass) when none qualifies. F1 alone would trust a weak stand-in reader that misses answers a stronger
    reader finds in the windows a lower mass drops; the coverage floor guards those.

    ``f1`` and ``coverage``: ``[mass, question]``; ``reference`` and ``tolerance``: ``[question]``, a NaN reference
    (no gold to score on these papers) leaving that question's F1 unconstrained; ``cost``: ``[mass]``.
    """
    masses_, cost_ = np.asarray(masses, dtype=float), np.asarray(cost, dtype=float)
    reference_ = np.asarray(reference, dtype=float)
    # within the tolerance inclusive, up to floating-point rounding (0.30 - 0.01 is not 0.29)
    margin = np.asarray(f1, dtype=float) - (reference_ - np.asarray(tolerance, dtype=float))
    close = (margin >= -1e-9) | np.isnan(reference_)
    qualifies = close.all(axis=1) & (np.asarray(coverage, dtype=float) >= floor).all(axis=1)
    if not qualifies.any():
        return fallback
    order = [i for i in np.lexsort((-masses_, cost_)) if qualifies[i]]
    return float(masses_[order[0]])
