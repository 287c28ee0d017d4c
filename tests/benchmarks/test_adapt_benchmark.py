"""benchmarks/adapt.py's cross-fitting: folds, and scoring every fold's adapted reader as one arm."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# loaded from its file: benchmarks/ is a folder of scripts, and this test folder's name hides it as a package
_SPEC = importlib.util.spec_from_file_location(
    "adapt_benchmark", Path(__file__).resolve().parents[2] / "benchmarks" / "adapt.py")
adapt_benchmark = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = adapt_benchmark
_SPEC.loader.exec_module(adapt_benchmark)


def _row(paper: str, answer: str, model: str) -> dict:
    return {"paper_id": paper, "question_id": "q1", "answer": answer, "stage": "extractive", "models": [model],
            "ensemble": False, "final": True, "score": 0.5}


def test_each_folds_reader_is_scored_on_the_papers_it_read() -> None:
    # fold 0's reader read paper b, fold 1's read paper a: each paper's answers count, whatever folder answered
    gold = {"q1": {"a": ["random forest"], "b": ["support vector machine"]}}
    rows = [_row("a", "random forest", "work/fold1/reader"), _row("b", "support vector machine", "work/fold0/reader")]
    items = adapt_benchmark.scores(gold, rows, ["q1"], ["a", "b"], "adapted")["q1"]
    assert [item.n_pred for item in items] == [1, 1]
    assert [item.f1 for item in items] == [1.0, 1.0]


def test_papers_not_asked_for_are_not_scored() -> None:
    gold = {"q1": {"a": ["random forest"], "b": ["lasso"]}}
    rows = [_row("a", "random forest", "r"), _row("b", "lasso", "r")]
    items = adapt_benchmark.scores(gold, rows, ["q1"], ["a"], "zero-shot")["q1"]
    assert len(items) == 1 and items[0].f1 == 1.0


def test_folds_cover_every_paper_once() -> None:
    papers = [f"p{i}" for i in range(34)]
    for k in (17, 8, 4):
        folds = adapt_benchmark.folds_of(papers, k)
        assert [p for fold in folds for p in fold] == papers  # consecutive papers, each in one fold
        assert {len(fold) for fold in folds} <= {k, k + 1}
