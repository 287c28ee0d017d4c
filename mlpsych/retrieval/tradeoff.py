"""The rule that picks the fast preset's point on the cost/coverage trade-off, stated before any figure is read.

``benchmarks/cascade_retrieval.py`` scores every configuration of the cascade on the development papers (coverage
of the full read's gold spans per question, FLOPs of both readers) and applies this rule on some papers to measure
its choice on others; ``settings.FAST_CASCADE`` is its choice on all of them.
"""

from __future__ import annotations

import numpy as np


def choose_point(coverage: np.ndarray, cost: np.ndarray, targets: np.ndarray) -> int:
    """Index of the configuration to use: the cheapest whose coverage reaches every question's target; if none
    does, the one whose worst question falls least short of its target, then the cheaper (first on full ties).

    ``coverage``: ``[configuration, question]``; ``cost``: ``[configuration]``; ``targets``: ``[question]``.
    """
    short = (np.asarray(coverage, dtype=float) - np.asarray(targets, dtype=float)).min(axis=1)
    meets = short >= 0
    return int(np.lexsort((np.asarray(cost, dtype=float), -np.where(meets, 0.0, short), ~meets))[0])
