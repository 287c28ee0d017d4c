"""The MLPsych development papers and their gold answers, as the answer benchmarks read them."""

from __future__ import annotations

import json
from pathlib import Path

from mlpsych.documents import Document
from mlpsych.evaluation import evaluate as ev


def development_set(data: Path, count: int | None = None) -> tuple[dict[str, dict[str, list[str]]], list[Document]]:
    """Gold answers and the development papers of an MLPsych folder (``text.json``, ``answers_dev.json``): the
    papers are the keys of the gold's q1, in its order, the first ``count`` of them if given."""
    texts = ev.load_texts(data / "text.json")
    gold = ev.gold_from_dict(json.loads((data / "answers_dev.json").read_text(encoding="utf-8")))
    return gold, [Document(id=i, text=texts[i]) for i in list(gold["q1"])[:count]]


def split_halves(ids: list[str]) -> dict[str, list[str]]:
    """Halves A and B of the papers (alternate ones in the gold's order): a choice made on one is judged on the
    other, and a difference is only believed when both halves show it."""
    return {"A": ids[0::2], "B": ids[1::2]}
