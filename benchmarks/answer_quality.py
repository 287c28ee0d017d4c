"""Answer quality of the presets and of each deviation of the default from the paper's code, scored on real answers.

    python benchmarks/answer_quality.py --data ../shared/mlpsych --reader READER_FOLDER [--arms a,b,...]

READER_FOLDER is a real SQuAD2 reader (``mlpsych dev train-reader``); it stands in every reader slot of every arm
(an ensemble of one model: the union-of-models deviation cannot be measured this way). The development papers are
read through the whole pipeline with the LLM stage off (extractive answers) and scored by ``mlpsych eval``'s rules
(the reference's: a paper without prediction scores 0; q2's empty gold scores EM/Mentions, F1 left out).

Arms: ``reference`` (the paper's code), ``paper`` (mlpsych's default), ``fast``, ``paper-bf16`` (the default with the
reader in bf16), and ``paper`` with one deviation at a time set back to the reference's behaviour (``+windows``,
``+answer-len`` ...: see ``ARMS``). Every arm but ``paper-bf16`` runs the reader in fp32. q4 (every q1 answer asked
about, each reading the whole paper) runs in the arms named in ``--q4-arms`` only, on the first ``--q4-papers``
papers, since it costs several times q1-q3.

The papers are split into two fixed halves (alternate papers in the gold's order); each arm prints per question
F1, EM, Mentions, the precision-aware micro F1 (exact: mF1; partial overlap: pF1), answers per paper and words per
answer, on each half and pooled with a 95% bootstrap interval, then the arms' differences from ``paper`` per half
with paired bootstrap intervals, the windows read and the seconds. Each arm has its own cache (a subfolder of
``--cache``; start from an empty one, or the windows and seconds are only what was not cached), so its windows and
seconds are its whole cost. The F1 and Mentions of the paper take, for each gold answer, the best predicted answer,
so more answers never lower them: read them beside answers per paper and mF1/pF1. Last, each ablation's decision
by the rule of ``decide``.

``paper-fold-exact,paper-fold-entity`` (and ``fast-...``) are the preset with ``AnswerSettings.fold`` set each way,
read from the preset's cache (the same spans, merged otherwise); with a pair among the arms the script prints the
final rows per paper a coder sees and the folding rule of ``decide_fold`` (fixed before its figures, 2026-11-28:
decided on half A, reported on B).

``--masses 0.7,...,0.99 --curve CURVE.json`` judges the fast cascade's mass by answers: one arm per mass (the
preset otherwise as shipped), and the mass rule (``tradeoff.choose_by_answers`` with ``REFERENCE_MASS``,
``TOLERANCE``, ``COVERAGE_FLOOR``; coverage and FLOPs from cascade_retrieval.py's ``--json``) applied on each half
and measured on the other (arm ``fast-rule``, out of sample; ``--against paper,fast-mass0.99`` prints its
differences from both), then on every paper.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._devset import development_set, split_halves  # noqa: E402
from mlpsych.cache import ResultCache  # noqa: E402
from mlpsych.documents import Document  # noqa: E402
from mlpsych.evaluation import evaluate as ev  # noqa: E402
from mlpsych.evaluation.metrics import ItemScore, aggregate  # noqa: E402
from mlpsych.export import answer_rows  # noqa: E402
from mlpsych.pipeline import Pipeline  # noqa: E402
from mlpsych.questions import QuestionSet, load_question_set  # noqa: E402
from mlpsych.retrieval.tradeoff import choose_by_answers  # noqa: E402
from mlpsych.settings import (  # noqa: E402
    FAST_CASCADE,
    CascadeSettings,
    RunSettings,
    apply_preset,
    deep_update,
    substitute_models,
)

METRICS = ("F1", "EMat", "Ment", "mF1", "pF1", "spans/answer", "words/span")
LABELS = {"spans/answer": "answers/paper", "words/span": "words/answer"}
DIFF_METRICS = ("F1", "Ment", "mF1", "pF1", "spans/answer")


@dataclass(frozen=True)
class Arm:
    """A configuration: a preset, then settings and template fields changed on top of it."""

    preset: str
    settings: dict[str, Any] = field(default_factory=dict)
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)  # question id -> fields
    deviation: str = ""


FP32 = {"reader": {"dtype": "fp32"}}
ARMS: dict[str, Arm] = {
    "reference": Arm("reference"),
    "paper": Arm("paper", FP32),
    "fast": Arm("fast", FP32),
    # q2 also reading the windows where the paper marks a tool (CascadeSettings.tool_windows), on and off
    "fast-tools-on": Arm("fast", deep_update(FP32, {"retrieval": {"cascade": {"tool_windows": True}}}),
                         deviation="the cascade's q2 also reads the windows marking a tool"),
    "fast-tools-off": Arm("fast", deep_update(FP32, {"retrieval": {"cascade": {"tool_windows": False}}}),
                          deviation="the cascade's q2 reads only the windows it chooses"),
    "paper-bf16": Arm("paper", {"reader": {"dtype": "bf16"}}, deviation="reader in bf16"),
    # the default with one of its deviations set back to the paper's code
    "+windows": Arm("paper", deep_update(FP32, {"reader": {"max_length": 384, "layout": "per_question"}}),
                    deviation="384-token windows laid out per question (not the model's 512, shared)"),
    "+answer-len": Arm("paper", deep_update(FP32, {"reader": {"max_answer_tokens": 15}}),
                       deviation="answers of at most 15 tokens (not 30 / 96 by kind)"),
    "+words": Arm("paper", deep_update(FP32, {"reader": {"snap_to_words": True}}),
                  deviation="spans snapped to the tokenizer's words"),
    "+search": Arm("paper", deep_update(FP32, {"reader": {"search": "exhaustive"}}),
                   deviation="every start/end pair searched (not the top-20 starts x ends)"),
    "+duplicates": Arm("paper", deep_update(FP32, {"reader": {"dedupe": False}}),
                       deviation="a span found in two windows kept twice before the top-k cut"),
    "+top20": Arm("paper", FP32, {"q2": {"top_k": 20, "allow_empty": False, "merge": True}, "q3": {"top_k": 20}},
                  deviation="top 20 for every question, no null-score filter, q2 merged"),
    "+same-text": Arm("paper", deep_update(FP32, {"reader": {"same_text": "summed"}, "answers": {"read": 20}}),
                      {q: {"top_k": 30} for q in ("q1", "q2", "q3")},
                      deviation="same texts summed over the top 30, the first 20 merged (transformers 4.57's "
                                "pipeline, the released code)"),
    "+merging": Arm("paper", deep_update(FP32, {"answers": {"rules": "released"}}),
                    deviation="the released merging rules"),
    # final answers of q1 and q2 naming one entity written differently (case, hyphens, a plural s) kept apart, as the
    # released code keeps them, or folded into one (AnswerSettings.fold); each reads from its preset's cache
    "paper-fold-exact": Arm("paper", deep_update(FP32, {"answers": {"fold": "exact"}}),
                            deviation="the default, answers naming one entity written differently kept apart"),
    "paper-fold-entity": Arm("paper", deep_update(FP32, {"answers": {"fold": "entity"}}),
                             deviation="the default, answers naming one entity folded into one"),
    "fast-fold-exact": Arm("fast", deep_update(FP32, {"answers": {"fold": "exact"}}),
                           deviation="fast, answers naming one entity written differently kept apart"),
    "fast-fold-entity": Arm("fast", deep_update(FP32, {"answers": {"fold": "entity"}}),
                            deviation="fast, answers naming one entity folded into one"),
    "+q4": Arm("paper", deep_update(FP32, {"answers": {"per_entity": 3, "entity_case": "exact"},
                                            "max_sub_questions": 10_000}),
               deviation="q4: every q1 answer asked, 3 of 5 answers kept per entity"),
}


def fold_arm(config: str) -> Arm:
    """The fast preset with the cascade configuration ``config`` ("fuse=signals spans=100 ..." as
    cascade_retrieval.py names them): ``general`` has q4 also ask about machine learning in general,
    ``bridge_windows`` says where its sub-questions read (the setting's default when not named: names written
    before it existed)."""
    fields = dict(part.split("=") for part in config.split())
    cascade = {"fuse": fields["fuse"], "mass": float(fields["mass"]), "spans": int(fields["spans"]),
               "min_windows": int(fields["min_windows"]),
               "bridge_windows": fields.get("bridge_windows", CascadeSettings().bridge_windows)}
    questions: dict[str, dict[str, Any]] = {}
    for q in load_question_set("mlpsych").questions:
        if q.retrieval is None:
            continue
        if q.bridge_from:
            questions[q.id] = {"retrieval": {"also_ask": ["machine learning"] if fields.get("general") == "True"
                                             else []}}
    return Arm("fast", deep_update(FP32, {"retrieval": {"cascade": cascade}}), questions, deviation=config)


def mass_arm(mass: float) -> Arm:
    """The fast preset with its cascade's ``mass`` changed (its other settings as shipped)."""
    return Arm("fast", deep_update(FP32, {"retrieval": {"cascade": {"mass": mass}}}), deviation=f"cascade mass {mass}")


def arm_config(arm: Arm, library: QuestionSet, reader: str) -> tuple[QuestionSet, RunSettings]:
    questions, settings = apply_preset(arm.preset, library, RunSettings())
    data = deep_update(settings.model_dump(), arm.settings)
    data["llm"]["enabled"] = False
    data["reader"]["device"] = "cpu"
    if data["retrieval"]["cascade"]["model"]:  # the stand-in is the cascade's small reader too
        data["retrieval"]["cascade"]["model"] = reader
    changed = []
    for q in questions.questions:
        update = dict(arm.questions.get(q.id, {}))
        if "retrieval" in update and q.retrieval is not None:  # fields of the template's retrieval block
            update["retrieval"] = q.retrieval.model_copy(update=update["retrieval"])
        changed.append(q.model_copy(update=update))
    questions = questions.model_copy(update={"questions": changed})
    return substitute_models(questions, {m: reader for q in questions.questions for m in q.models}), \
        RunSettings.model_validate(data)


def run_arm(arm: Arm, library: QuestionSet, reader: str, docs: list[Document], cache: ResultCache) -> dict:
    questions, settings = arm_config(arm, library, reader)
    pipeline = Pipeline(questions, settings, cache, progress=True)
    started = time.perf_counter()
    result = pipeline.run(docs)
    return {"rows": answer_rows(result, final_only=True), "seconds": time.perf_counter() - started,
            "windows": pipeline.windows_read, "errors": result.errors}


def items_by_question(gold: dict, rows: list[dict], asked: list[str], texts: dict[str, str]) -> dict[str, list]:
    """Per question, one ItemScore per paper in the plan's fixed paper order (the same for every arm)."""
    table = ev.evaluate(gold, rows, questions=asked, texts=texts)
    return {row.question: row.items for row in table}


def bootstrap(items: list[ItemScore], metric: str, rounds: int, seed: int,
              other: list[ItemScore] | None = None) -> tuple[float, float]:
    """95% percentile interval of ``metric`` (or of its paired difference from ``other``) over resampled papers."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(rounds):
        pick = rng.integers(0, len(items), len(items))
        value = aggregate([items[i] for i in pick])[metric]
        if other is not None:
            value -= aggregate([other[i] for i in pick])[metric]
        if not math.isnan(value):
            values.append(value)
    return (float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))) if values else (math.nan, math.nan)


# The rule, fixed before the figures were read: a deviation of the default stays where, on BOTH halves, it is better
# (mean F1 over the questions it touches higher by more than TIE, Mentions not lower by more than TIE, and, when it
# gives more than 10% more answers per paper, the precision-aware pF1 not lower), or equal (F1 and Mentions within
# TIE) and cheaper (fewer windows read); otherwise the default takes the reference's behaviour.
TIE = 0.005

# The mass rule (``mlpsych.retrieval.tradeoff.choose_by_answers``), fixed before its figures were read
# (2026-11-26): a mass qualifies on some papers where its F1 is within 0.01 of the mass-0.99 point's on q1-q3 and
# within 0.02 of the full read's (`paper`) on q4, and its gold-span coverage (cascade_retrieval.py) is at least 0.90
# on every question; the cheapest (FLOPs) qualifies; none: 0.99.
REFERENCE_MASS = 0.99
TOLERANCE = {"q1": 0.01, "q2": 0.01, "q3": 0.01, "q4": 0.02}
COVERAGE_FLOOR = 0.90


def decide(arm: str, figures: dict, runs: dict) -> tuple[str, str]:
    """``("keep" | "adopt", why)`` for an ablation arm (the default with one deviation set back to the reference)."""
    asked = [q for q in ("q1", "q2", "q3", "q4") if q in figures[arm]["pooled"] and q in figures["paper"]["pooled"]]
    if arm != "+q4":
        asked = [q for q in asked if q != "q4"]
    verdicts = []
    for half in "AB":
        def mean(name: str, metric: str) -> float:
            values = [aggregate(figures[name]["halves"][half].get(q, []))[metric] for q in asked]
            values = [v for v in values if not math.isnan(v)]
            return sum(values) / len(values) if values else math.nan

        d_f1, d_ment, d_pf1 = (mean("paper", m) - mean(arm, m) for m in ("F1", "Ment", "pF1"))
        more = mean("paper", "spans/answer") > 1.1 * mean(arm, "spans/answer")
        if d_f1 > TIE and d_ment >= -TIE and (not more or d_pf1 >= 0):
            verdicts.append("better")
        elif abs(d_f1) <= TIE and abs(d_ment) <= TIE:
            verdicts.append("equal")
        else:
            verdicts.append("worse")
    cheaper = runs["paper"]["windows"] < runs[arm]["windows"]
    if verdicts == ["better", "better"]:
        return "keep", "better on both halves"
    if set(verdicts) <= {"better", "equal"} and cheaper:
        return "keep", f"{' / '.join(verdicts)} on the halves and cheaper"
    return "adopt", f"{' / '.join(verdicts)} on the halves" + (" (not cheaper)" if "worse" not in verdicts else "")


def decide_fold(off: str, on: str, figures: dict, half: str) -> str:
    """The folding rule (fixed before its figures, 2026-11-28) on one half, ``on`` (answers naming one entity folded)
    against ``off`` (kept apart): "helps" when the mean pF1 over q1 and q2 is higher and none of F1, EM, Mentions of
    q1 or q2 is lower by more than TIE; "hurts" when the mean pF1 is lower or one of those is lower by more than
    TIE; "no change" when nothing moved; else "neither". Decided on half A, reported on B: shipped only where it
    helps on both."""
    scored = {n: {q: aggregate(figures[n]["halves"][half].get(q, [])) for q in ("q1", "q2")} for n in (off, on)}
    delta = {(q, m): scored[on][q][m] - scored[off][q][m] for q in ("q1", "q2") for m in ("F1", "EMat", "Ment", "pF1")}
    d_pf1 = (delta["q1", "pF1"] + delta["q2", "pF1"]) / 2
    lower = any(delta[q, m] < -TIE for q in ("q1", "q2") for m in ("F1", "EMat", "Ment"))
    if all(abs(v) < 1e-12 for v in delta.values()):
        return "no change"
    if d_pf1 < 0 or lower:
        return "hurts"
    return "helps" if d_pf1 > 0 else "neither"


def final_rows(rows: list[dict], papers: list[str], question: str) -> float:
    """Final answer rows per paper for a question, as a coder sees them (before the scorer folds answers whose
    normalized texts are equal)."""
    chosen = set(papers)
    return sum(1 for r in rows if r["question_id"] == question and r["paper_id"] in chosen) / max(len(chosen), 1)


def arm_figures(run: dict, gold: dict, corpus: dict[str, str], halves: dict[str, list[str]], q4_papers: int) -> dict:
    """An arm's items per question, pooled and per half (q4 on the first ``q4_papers`` papers it was asked of)."""
    ids = list(corpus)
    asked = run["asked"]
    first = [q for q in asked if q != "q4"]
    per_half = {h: items_by_question({q: {p: g for p, g in gold.get(q, {}).items() if p in papers}
                                          for q in first}, run["rows"], first,
                                     {p: corpus[p] for p in papers}) for h, papers in halves.items()}
    pooled = items_by_question({q: {p: g for p, g in gold.get(q, {}).items() if p in corpus} for q in first},
                               run["rows"], first, corpus)
    if "q4" in asked:  # scored on the papers it was asked of
        q4_ids = set(ids[: q4_papers])
        for scope, papers in [("pooled", ids), *halves.items()]:
            q4_gold = {"q4": {p: g for p, g in gold.get("q4", {}).items() if p in q4_ids and p in papers}}
            if not q4_gold["q4"]:
                continue
            found = items_by_question(q4_gold, run["rows"], ["q4"],
                                      {p: corpus[p] for p in papers if p in q4_ids})
            (pooled if scope == "pooled" else per_half[scope])["q4"] = found.get("q4", [])
    return {"pooled": pooled, "halves": per_half}


def choose_mass(masses: list[float], figures: dict, curve: dict, scope: str) -> float:
    """The mass rule on the papers of ``scope`` (a half, or "pooled" for all): F1 from this run's arms
    (`fast-mass<m>`, `paper` for q4's reference), coverage and FLOPs from cascade_retrieval.py's curve; prints why."""
    def f1(name: str, q: str) -> float:
        scored = figures[name]["pooled"] if scope == "pooled" else figures[name]["halves"][scope]
        return aggregate(scored[q])["F1"] if scored.get(q) else math.nan

    questions = list(TOLERANCE)
    points = [curve["curve"][str(m)] if scope == "pooled" else curve["curve_halves"][str(m)][scope] for m in masses]
    cost = [p["tflops_per_paper"]["small"] + p["tflops_per_paper"]["large"] for p in points]
    f1s = np.array([[f1(mass_name(m), q) for q in questions] for m in masses])
    reference = [f1("paper" if q == "q4" else mass_name(REFERENCE_MASS), q) for q in questions]
    covered = np.array([[p["coverage"][q] for q in questions] for p in points])
    chosen = choose_by_answers(masses, cost, f1s, reference, [TOLERANCE[q] for q in questions], covered,
                               COVERAGE_FLOOR, REFERENCE_MASS)
    print(f"\nmass rule on {scope}: reference F1 " + ", ".join(f"{q} {r:.3f}" for q, r in zip(questions, reference)))
    for m, row, cov, c in zip(masses, f1s, covered, cost):
        print(f"  mass {m}: F1 " + " ".join(f"{v:.3f}" for v in row) + "; coverage " + " ".join(f"{v:.3f}" for v in cov)
              + f"; TFLOPs per paper {c:.2f}" + ("  <- chosen" if m == chosen else ""))
    return chosen


def mass_name(mass: float) -> str:
    return f"fast-mass{mass:g}"


def held_out_cascade(curve: dict, chosen: dict[str, float]) -> str:
    """Coverage, large windows and FLOPs of each half read at the mass chosen on the other, pooled (exact)."""
    parts = [curve["curve_halves"][str(chosen[h])][h] for h in "AB"]
    papers = sum(p["papers"] for p in parts)

    def per_paper(figure: str, key: str) -> float:
        return sum(p[figure][key] * p["papers"] for p in parts) / papers

    hits = {q: [sum(p["hits"][q][i] for p in parts) for i in (0, 1)] for q in TOLERANCE}
    full, small, large = (per_paper("tflops_per_paper", k) for k in ("full", "small", "large"))
    return (", ".join(f"{q} {r / max(g, 1):.3f} ({r:.0f}/{g:.0f}, {per_paper('windows_per_paper', q):.1f} win)"
                      for q, (r, g) in hits.items())
            + f"; TFLOPs per paper: full read {full:.1f}, small {small:.2f}, large {large:.2f} -> "
              f"{full / (small + large):.1f}x fewer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the MLPsych folder (text.json, answers_dev.json)")
    parser.add_argument("--reader", required=True, help="a trained reader folder standing in for every model")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--q4-arms", default="reference,paper,+q4")
    parser.add_argument("--q4-papers", type=int, default=8, help="q4 is asked of the first N papers only")
    parser.add_argument("--papers", type=int, default=None, help="only the first N development papers")
    parser.add_argument("--rounds", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--cache", type=Path, default=None, help="folder of the arms' caches (default: a temp one)")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    parser.add_argument("--dtype", default=None, help="run every arm's readers in this dtype (default: fp32, and "
                        "bf16 for paper-bf16); bf16 gave identical F1/EM/Mentions at 2.2x the speed here")
    parser.add_argument("--folds", type=Path, default=None,
                        help="cascade_retrieval.py's --json output: adds the arm `fast-cv`, the fast preset whose "
                             "cascade settings for each half were chosen on the other half (out of sample), and "
                             "`fast-cv-<value>` per value of bridge_windows it judged other than the preset's")
    parser.add_argument("--masses", default="", help="cascade masses, comma-separated: adds the arm `fast-mass<m>` "
                        "per mass, the fast preset at that mass (one cache for all: the small reader reads the same; "
                        "`fast-mass` in --q4-arms asks q4 in all)")
    parser.add_argument("--curve", type=Path, default=None,
                        help="cascade_retrieval.py's --json output: with --masses (0.99 among them) and `paper` asking "
                             "q4, the mass rule (REFERENCE_MASS ...) chooses a mass on each half; adds the arm "
                             "`fast-rule`, each half's answers at the mass chosen on the other (out of sample)")
    parser.add_argument("--against", default="paper", help="arms the others' differences are printed from")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    gold, docs = development_set(args.data, args.papers)
    ids = [d.id for d in docs]
    corpus = {d.id: d.text for d in docs}
    halves = split_halves(ids)
    arms = [a for a in args.arms.split(",") if a]
    q4_arms = set(args.q4_arms.split(","))
    library = load_question_set("mlpsych")
    cache_dir = args.cache or Path(tempfile.mkdtemp(prefix="mlpsych-answer-quality-"))

    plans: dict[str, list[tuple[Arm, list[Document]]]] = {name: [(ARMS[name], docs)] for name in arms if name in ARMS}
    labels = {name: ARMS[name].deviation or ARMS[name].preset for name in plans}
    masses = [float(m) for m in args.masses.split(",") if m]
    caches = {mass_name(m): "fast-mass" for m in masses}
    caches.update({name: ARMS[name].preset for name in arms if "-fold-" in name})  # the same reads, merged otherwise
    for mass in masses:
        plans[mass_name(mass)] = [(mass_arm(mass), docs)]
        labels[mass_name(mass)] = mass_arm(mass).deviation
        arms.append(mass_name(mass))
    if "fast-mass" in q4_arms:
        q4_arms |= set(caches)
    folds: dict[str, dict[str, str]] = {}  # arm -> half -> the cascade settings chosen on the other half
    if args.folds:
        chosen = json.loads(args.folds.read_text(encoding="utf-8"))
        folds["fast-cv"] = chosen["held_out"]
        folds.update({f"fast-cv-{value}": held for value, held in chosen.get("held_out_bridge", {}).items()
                      if value != FAST_CASCADE.bridge_windows})
    for name, held_out in folds.items():  # each half read with the cascade settings chosen on the other half
        plans[name] = [(fold_arm(held_out[h]), [d for d in docs if d.id in halves[h]]) for h in "AB"]
        labels[name] = str(held_out)
        arms.append(name)
    runs: dict[str, dict] = {}
    for name in arms:
        print(f"arm {name}: {labels[name]}", flush=True)
        cache = ResultCache(cache_dir / caches.get(name, name.lstrip("+")))
        runs[name] = {"rows": [], "seconds": 0.0, "windows": 0, "errors": {}, "asked": ["q1", "q2", "q3"]}
        for arm, papers in plans[name]:
            if args.dtype:
                arm = replace(arm, settings=deep_update(arm.settings, {"reader": {"dtype": args.dtype}}))
            parts = [run_arm(arm, library.select(["q1", "q2", "q3"]), args.reader, papers, cache)]
            if name in q4_arms:  # q1 again (from the cache) and its follow-up, on the first papers
                first = {d.id for d in docs[: args.q4_papers]}
                follow = run_arm(arm, library.select(["q1", "q4"]), args.reader, [d for d in papers if d.id in first],
                                 cache)
                follow["rows"] = [r for r in follow["rows"] if r["question_id"] == "q4"]
                parts.append(follow)
            for part in parts:
                runs[name]["rows"] += part["rows"]
                runs[name]["seconds"] += part["seconds"]
                runs[name]["windows"] += part["windows"]
                runs[name]["errors"].update(part["errors"])
        if name in q4_arms:
            runs[name]["asked"].append("q4")
        cache.close()
        for doc_id, problems in runs[name]["errors"].items():
            print(f"  {doc_id}: {'; '.join(problems)}")

    figures = {name: arm_figures(runs[name], gold, corpus, halves, args.q4_papers) for name in arms}
    if args.curve and masses:  # the mass rule on each half, measured on the other; then on every paper
        curve = json.loads(args.curve.read_text(encoding="utf-8"))
        chosen = {test: choose_mass(masses, figures, curve, train) for train, test in (("A", "B"), ("B", "A"))}
        runs["fast-rule"] = {"rows": [r for h in "AB" for r in runs[mass_name(chosen[h])]["rows"]
                                      if r["paper_id"] in halves[h]],
                             "seconds": 0.0, "windows": 0, "asked": runs[mass_name(REFERENCE_MASS)]["asked"]}
        figures["fast-rule"] = arm_figures(runs["fast-rule"], gold, corpus, halves, args.q4_papers)
        arms.append("fast-rule")
        print(f"\narm fast-rule: half A read at mass {chosen['A']} (chosen on B), half B at {chosen['B']} (chosen "
              f"on A); its windows and seconds are those arms' (0 here)")
        print(f"  cascade, held-out halves pooled (out of sample): {held_out_cascade(curve, chosen)}")
        print(f"  the same at mass {REFERENCE_MASS}: {held_out_cascade(curve, dict.fromkeys('AB', REFERENCE_MASS))}")
        shipped = choose_mass(masses, figures, curve, "pooled")
        print(f"\nthe mass rule on all {len(ids)} papers (the preset's mass, in sample): {shipped}")

    print(f"\n{len(docs)} development papers (halves A, B of {len(halves['A'])} and {len(halves['B'])}), reader "
          f"{Path(args.reader).name} in every slot, LLM off; {args.rounds} bootstrap resamples of papers")
    out: dict[str, Any] = {}
    for q in ["q1", "q2", "q3", "q4"]:
        names = [n for n in arms if q in figures[n]["pooled"]]
        if not names:
            continue
        print(f"\n### {q}\n")
        print("| arm | " + " | ".join(f"{LABELS.get(m, m)} A / B / pooled [95%]" for m in METRICS[:5])
              + " | answers/paper | words/answer | windows | seconds |")
        print("|---|" + "---|" * 9)
        for n in names:
            pooled = figures[n]["pooled"][q]
            cells = []
            for m in METRICS[:5]:
                a, b = (aggregate(figures[n]["halves"][h].get(q, []))[m] for h in "AB")
                lo, hi = bootstrap(pooled, m, args.rounds, 0)
                cells.append(f"{a:.3f} / {b:.3f} / {aggregate(pooled)[m]:.3f} [{lo:.3f}, {hi:.3f}]")
                out.setdefault(n, {}).setdefault(q, {})[m] = {"A": a, "B": b, "pooled": aggregate(pooled)[m],
                                                              "interval": [lo, hi]}
            agg = aggregate(pooled)
            print(f"| {n} | " + " | ".join(cells) + f" | {agg['spans/answer']:.1f} | {agg['words/span']:.1f} | "
                  f"{runs[n]['windows']} | {runs[n]['seconds']:.0f} |")
        for against in [a for a in args.against.split(",") if a in names and len(names) > 1]:
            print(f"\n{q}, difference from `{against}` (arm minus {against}), per half, pooled with paired 95% "
                  "interval:\n")
            print("| arm | " + " | ".join(f"Δ{LABELS.get(m, m)} A / B / pooled [95%]" for m in DIFF_METRICS) + " |")
            print("|---|" + "---|" * len(DIFF_METRICS))
            base = figures[against]
            for n in names:
                if n == against:
                    continue
                cells = []
                for m in DIFF_METRICS:
                    da, db = (aggregate(figures[n]["halves"][h].get(q, []))[m]
                              - aggregate(base["halves"][h].get(q, []))[m] for h in "AB")
                    dp = aggregate(figures[n]["pooled"][q])[m] - aggregate(base["pooled"][q])[m]
                    lo, hi = bootstrap(figures[n]["pooled"][q], m, args.rounds, 1, other=base["pooled"][q])
                    cells.append(f"{da:+.3f} / {db:+.3f} / {dp:+.3f} [{lo:+.3f}, {hi:+.3f}]")
                    out[n][q][f"diff_{m}" if against == "paper" else f"diff_{against}_{m}"] = {
                        "A": da, "B": db, "pooled": dp, "interval": [lo, hi]}
                print(f"| {n} | " + " | ".join(cells) + " |")
    ablations = [n for n in arms if n.startswith("+") and "paper" in arms]
    if ablations:
        print(f"\nDecisions (rule in decide(): better on both halves, or equal within {TIE} and cheaper):\n")
        print("| deviation of the default | set back to the reference's | decision | why |")
        print("|---|---|---|---|")
        for n in ablations:
            verdict, why = decide(n, figures, runs)
            print(f"| {n} | {ARMS[n].deviation} | {'keep the deviation' if verdict == 'keep' else 'adopt the reference'}"
                  f" | {why} |")
            out[n]["decision"] = {"verdict": verdict, "why": why}
    folds = [(n, n.replace("-exact", "-entity")) for n in arms
             if n.endswith("-fold-exact") and n.replace("-exact", "-entity") in arms]
    if folds:
        print("\nFinal rows per paper as a coder sees them, q1 / q2, halves A / B / all:\n")
        for n in [n for pair in folds for n in pair]:
            cells = [" / ".join(f"{final_rows(runs[n]['rows'], papers, q):.2f}"
                                for papers in (halves["A"], halves["B"], ids)) for q in ("q1", "q2")]
            print(f"  {n}: q1 {cells[0]}; q2 {cells[1]}")
        print("\nFolding answers naming one entity (decide_fold: decided on A, reported on B):\n")
        for off, on in folds:
            verdicts = {h: decide_fold(off, on, figures, h) for h in "AB"}
            print(f"  {on} against {off}: A {verdicts['A']}, B {verdicts['B']} -> "
                  f"{'ship' if verdicts == {'A': 'helps', 'B': 'helps'} else 'do not ship'}; final rows "
                  f"{len(runs[off]['rows'])} -> {len(runs[on]['rows'])}")
            out.setdefault(on, {})["fold_decision"] = verdicts
    print("\nScored as `mlpsych eval` scores (the reference's rules): papers with gold and no prediction score 0; "
          "q2 papers with empty gold score EM/Mentions 1 if nothing is predicted, else 0, and are left out of F1.")
    if args.json:
        for n in arms:
            out[n]["seconds"], out[n]["windows"] = runs[n]["seconds"], runs[n]["windows"]
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
