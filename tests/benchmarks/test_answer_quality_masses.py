"""answer_quality.py's mass rule wiring: F1 per half from the mass arms (q4's reference the full read), coverage
and FLOPs from cascade_retrieval's curve, and the held-out halves' cascade figures pooled by papers."""

from __future__ import annotations

from mlpsych.evaluation.metrics import ItemScore
from tests.benchmarks.scripts import load_script

answer_quality = load_script("answer_quality")

QUESTIONS = ("q1", "q2", "q3", "q4")


def scored(*f1: float) -> dict:
    """An arm's figures on half A: one paper per question with these F1 (half B and pooled the same)."""
    items = {q: [ItemScore(v, 0.0, None, 0.0, 1, 1, 1, 0, 0.0, 0.0, 0.0)] for q, v in zip(QUESTIONS, f1)}
    return {"pooled": items, "halves": {"A": items, "B": items}}


def point(coverage: float, tflops: float, windows: float, papers: int = 2) -> dict:
    return {"coverage": dict.fromkeys(QUESTIONS, coverage), "papers": papers,
            "hits": {q: [coverage * 10 * papers, 10.0 * papers] for q in QUESTIONS},
            "windows_per_paper": dict.fromkeys(QUESTIONS, windows),
            "tflops_per_paper": {"full": 200.0, "small": 2.0, "large": tflops}}


def curve(points: dict[float, dict]) -> dict:
    return {"curve": {str(m): p for m, p in points.items()},
            "curve_halves": {str(m): {"A": p, "B": p} for m, p in points.items()}}


def test_the_mass_rule_reads_each_mass_arm_and_the_full_read_for_q4():
    masses = [0.9, 0.95, 0.99]
    cascade = curve({0.9: point(0.95, 3.0, 10), 0.95: point(0.97, 4.0, 12), 0.99: point(1.0, 5.0, 14)})
    figures = {"paper": scored(0.20, 0.20, 0.20, 0.30),
               "fast-mass0.99": scored(0.30, 0.30, 0.30, 0.20),
               "fast-mass0.95": scored(0.295, 0.30, 0.30, 0.29),  # q1 within 0.01 of 0.99, q4 0.02 of paper
               "fast-mass0.9": scored(0.30, 0.30, 0.30, 0.27)}  # q4 0.03 below the full read: out
    assert answer_quality.choose_mass(masses, figures, cascade, "A") == 0.95
    figures["fast-mass0.95"] = scored(0.285, 0.30, 0.30, 0.29)  # q1 now 0.015 below 0.99's
    assert answer_quality.choose_mass(masses, figures, cascade, "pooled") == 0.99
    low = curve({0.9: point(0.85, 3.0, 10), 0.95: point(0.97, 4.0, 12), 0.99: point(1.0, 5.0, 14)})
    figures["fast-mass0.9"] = scored(0.30, 0.30, 0.30, 0.30)  # answers fine, coverage under the floor
    assert answer_quality.choose_mass(masses, figures, low, "B") == 0.99


def test_held_out_cascade_pools_each_half_at_the_mass_chosen_on_the_other_by_papers():
    cascade = {"curve_halves": {"0.9": {"A": point(0.9, 3.0, 10, papers=1), "B": point(0.8, 3.0, 10, papers=3)},
                                "0.99": {"A": point(1.0, 6.0, 20, papers=1), "B": point(1.0, 5.0, 14, papers=3)}}}
    line = answer_quality.held_out_cascade(cascade, {"A": 0.99, "B": 0.9})
    # half A at 0.99: 10 of 10 spans, 20 windows, 6 TFLOPs; half B at 0.9: 24 of 30, 10 windows, 3 TFLOPs
    assert line.startswith("q1 0.850 (34/40, 12.5 win)")
    assert "large 3.75 -> 34.8x fewer" in line
