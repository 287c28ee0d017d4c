"""Retrieval: which windows (or sentences) of a paper are worth reading for a question.

``ranking`` scores and picks windows (BM25, dense, entity anchors) and restricts a query to them; ``signals`` holds
the pattern signals (methods, software, aims, ...) that templates name; ``cascade`` lets a small reader's spans
choose the large readers' windows. Used only when retrieval is on.
"""

from mlpsych.retrieval import cascade
from mlpsych.retrieval.ranking import Plan, WindowSelector, bm25_scores, entity_windows, plan_for, restrict

__all__ = ["Plan", "WindowSelector", "bm25_scores", "cascade", "entity_windows", "plan_for", "restrict"]
