"""Combining the answers of a question's models into one list, with the models that gave each answer."""

from __future__ import annotations

from mlpsych.answers import Answer, Span
from mlpsych.documents import Document
from mlpsych.merge import merge_spans


def combine(doc: Document, spans_by_model: dict[str, list[Span]], *, merge: bool = True) -> list[Answer]:
    """One answer list from all models: the same merging rules run over every model's spans together.

    Each answer keeps the models that produced it (its agreement count is ``len(models)``) and its best score.
    """
    every = [span for spans in spans_by_model.values() for span in spans]
    return merge_spans(doc, every, merge=merge)
