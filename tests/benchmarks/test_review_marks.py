"""benchmarks/review_marks.py: it runs end to end on a small synthetic study and prints each figure."""

from __future__ import annotations

import sys

from tests.benchmarks.scripts import load_script

review_marks = load_script("review_marks")


def test_it_prints_every_figure_for_a_small_study(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["review_marks.py", "--papers", "3", "--answers", "4", "--model-answers", "2"])
    review_marks.main()
    out = capsys.readouterr().out
    assert "12 answer rows, 3 papers" in out
    for figure in ("open the review", "first redraw", "one mark", "redraw after a mark", "leave the paper",
                   "agree reads it", "reopen the review"):
        assert figure in out
