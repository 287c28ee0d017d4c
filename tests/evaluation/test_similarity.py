"""Similar Match embeds each answer it compares once (and no other), and its matrix product scores as pair by pair.

The embedder is the real tiny BERT of the test suite; the recorder below only notes what it is asked to embed.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mlpsych.embeddings import Embedder
from mlpsych.evaluation.metrics import score_item
from mlpsych.evaluation.similarity import EmbeddingSimilarity

from .test_evaluate import _run_cli, row

A, B = "deberta", "roberta"
GOLD = {
    "q1": {"p1": ["random forests (RF)", "LASSO"], "p2": ["SVM"]},
    "q3": {"p1": ["whether tweets predict mood"]},  # not asked for below: its gold is never compared
}
ROWS = [
    row("p1", "q1", "random forest", [A]), row("p1", "q1", "LASSO", [A]), row("p1", "q1", "random forest", [B]),
    row("p1", "q1", "an extractive answer the normalized list replaces", [A]),
    row("p1", "q1", "random forests", [A], stage="normalized"),
    row("p2", "q1", "support vector machine", [A]), row("p2", "q1", "SVM", [B]),
    row("p9", "q1", "an answer of a paper without gold", [A]),
    row("p1", "q3", "tweets", [A]),
]
COMPARED = {"random forests (RF)", "LASSO", "SVM", "random forest", "random forests", "support vector machine"}


@pytest.fixture
def embedded(monkeypatch) -> list[str]:
    """Every text the embedder is asked to encode, call after call (the real model still encodes them)."""
    seen: list[str] = []
    encode = Embedder.encode

    def recording(self, texts, instruction=None):
        texts = list(texts)
        seen.extend(texts)
        return encode(self, texts, instruction)

    monkeypatch.setattr(Embedder, "encode", recording)
    return seen


def _write(tmp_path: Path) -> tuple[Path, Path]:
    gold = tmp_path / "answers.json"
    gold.write_text(json.dumps(GOLD), encoding="utf-8")
    pred = tmp_path / "results.jsonl"
    pred.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return gold, pred


def test_eval_embeds_each_compared_answer_once_and_nothing_else(tmp_path, tiny_models, embedded):
    gold, pred = _write(tmp_path)
    assert _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--questions", "q1", "--embedder",
                     str(tiny_models["bert"]), "--device", "cpu", "--out", str(tmp_path / "report")]) == 0
    assert set(embedded) == COMPARED
    assert max(Counter(embedded).values()) == 1
    assert "SMat" in (tmp_path / "report" / "eval.md").read_text()


def test_scoring_shows_a_bar_unless_no_progress(tmp_path, capsys):
    gold, pred = _write(tmp_path)
    argv = ["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar"]
    assert _run_cli(argv) == 0
    assert "scoring" in capsys.readouterr().err
    assert _run_cli(argv + ["--no-progress"]) == 0
    assert "scoring" not in capsys.readouterr().err


def test_matrix_product_scores_as_the_per_pair_dot_product(tiny_models):
    """Repeated strings, and thresholds on either side of a pair's own cosine: the vectorized item and the item
    scored pair by pair (a plain function, no ``matches``) agree exactly."""
    gold = ["random forests (RF)", "LASSO", "SVM", "random forests (RF)"]
    preds = ["random forest", "LASSO regression", "SVM", "random forest", "k-means", "R"]
    similarity = EmbeddingSimilarity(Embedder(str(tiny_models["bert"]), device="cpu"))
    similarity.prepare(gold + preds)
    exact = float(np.dot(similarity._vectors[similarity._index["LASSO"]],
                         similarity._vectors[similarity._index["LASSO regression"]]))
    for threshold in (exact, float(np.nextafter(exact, 0)), float(np.nextafter(exact, 1)), 0.5, 0.9):
        for dedupe in (True, False):
            vectorized = score_item(gold, preds, similarity, threshold, dedupe=dedupe)
            per_pair = score_item(gold, preds, lambda a, b: similarity(a, b), threshold, dedupe=dedupe)
            assert vectorized == per_pair


def test_an_embedder_that_cannot_load_is_one_line_naming_no_similar(tmp_path):
    """The model now loads inside the scoring (when the compared answers are embedded): still one line."""
    from mlpsych.errors import UserError

    gold, pred = _write(tmp_path)
    with pytest.raises(UserError, match="--no-similar"):
        _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--embedder", str(tmp_path / "no-model"),
                  "--device", "cpu", "--no-progress"])
