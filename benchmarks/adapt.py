"""The coding loop, judged out of sample: a reader adapted on k coded papers against zero-shot, on papers it never saw,
and the calibrated confidence column.

    nice -n 5 python benchmarks/adapt.py --data ../shared/mlpsych --reader READER --work /work/bench25 [--k 17,8,4]

READER is the stand-in SQuAD2 reader (``mlpsych dev train-reader`` on ../shared/squad). The 34 development papers
(the gold's q1 keys, in order) are cut into ``34 // k`` folds of k or k+1 consecutive papers; the reader adapted on
fold i (exactly ``mlpsych adapt --gold FOLD_GOLD --texts text.json``, default settings, the fold's gold as the
coding) scores fold i+1 (cyclically), so every paper is scored once, by a reader that never saw it. Zero-shot is
the same reader unadapted. Both read with mlpsych's default settings (``--read all``, every window) or with the
templates' retrieval budgets (``--read retrieve`` as ``mlpsych run --read retrieve``: the same windows for both
readers, about a tenth of the reading), every reader slot the one reader, LLM stage off (extractive answers), and
are scored by ``mlpsych eval``'s rules: per question F1, Mentions, the
precision-aware partial F1 (pF1) and answers per paper, zero-shot vs adapted, with 95% paired bootstrap intervals
of the difference (papers resampled).

Confidence (per k): a calibrator fitted (``mlpsych.coding.confidence.fit``) on the zero-shot answers of fold i's
papers (the coded ones) and their gold labels gives the confidence of the answers of fold i+1 (zero-shot, and the
adapted reader's); the adapted reader's answers also get the calibrator ``mlpsych adapt`` wrote in its folder,
cross-fitted on its coded papers by readers adapted on the other coded papers (reading as the benchmark reads);
pooled over the folds: expected calibration error, Brier score, and the share of wrong answers among the least-sure
30%. Nothing is chosen on the papers a figure is reported on: folds, settings and rules are
fixed beforehand.

Every step is kept under ``--work`` (answers as JSON, adapted readers, their checkpoints, the reading cache), so a
rerun resumes where it stopped; ``results-k<k>.json`` holds the figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._devset import development_set  # noqa: E402
from benchmarks.answer_quality import ARMS, arm_config, bootstrap  # noqa: E402
from mlpsych.cache import ResultCache  # noqa: E402
from mlpsych.coding import confidence as cf  # noqa: E402
from mlpsych.coding.adapt import adapted_questions  # noqa: E402
from mlpsych.documents import Document  # noqa: E402
from mlpsych.evaluation import evaluate as ev  # noqa: E402
from mlpsych.evaluation.metrics import aggregate  # noqa: E402
from mlpsych.export import answer_rows  # noqa: E402
from mlpsych.pipeline import Pipeline  # noqa: E402
from mlpsych.questions import load_question_set  # noqa: E402

log = logging.getLogger("adapt-benchmark")
METRICS = ("F1", "Ment", "pF1", "spans/answer")
ARM_LABELS = {"adapted": "every question read with it",
              "as run": "`mlpsych run --adapted`: the base reader for questions with too few coded answers"}
LABELS = {"spans/answer": "answers/paper"}
OWN = "cross-fitted by adapt (its own)"  # the calibrator `mlpsych adapt` wrote in the reader folder


def reader_from_checkpoint(checkpoint: Path, work: Path) -> str:
    """A reader folder from a ``train-reader`` checkpoint (weights + the settings in its state.json), for when the
    stand-in's training has not finished: the base encoder's config and tokenizer with the checkpoint's weights."""
    import torch
    from safetensors.torch import load_model

    from mlpsych.dev.train_reader import STATE_FILE, TrainSettings, save_reader
    from mlpsych.models import load_qa_model, load_tokenizer

    state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
    out = work / f"stand-in-{state['fingerprint']}-step{state['step']}"
    if not (out / "model.safetensors").is_file():
        settings = TrainSettings(**state["settings"])
        model = load_qa_model(settings.base_model, "cpu", torch.float32, trained_head=False)
        load_model(model, str(checkpoint / "model.safetensors"))
        save_reader(out, model, load_tokenizer(settings.base_model), settings,
                    {"checkpoint": str(checkpoint), "step": state["step"], "steps": state["total"]})
    return str(out)


def folds_of(papers: list[str], k: int) -> list[list[str]]:
    """``len // k`` folds of consecutive papers, the first ones a paper larger when it does not divide."""
    n = max(2, len(papers) // k)
    size, extra = divmod(len(papers), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        out.append(papers[start:end])
        start = end
    return out


def read(reader: str, docs: list[Document], asked: list[str], work: Path, name: str, windows: str) -> list[dict]:
    """Final answer rows of ``reader`` on ``docs`` (kept in ``work/name.json``; the reading cache is shared)."""
    out = work / f"{name}.json"
    if out.is_file():
        return json.loads(out.read_text(encoding="utf-8"))
    library = load_question_set("mlpsych").select(asked)
    questions, settings = arm_config(ARMS["paper"], library, reader)
    settings = settings.model_copy(update={"retrieval": settings.retrieval.model_copy(update={"read": windows})})
    started = time.perf_counter()
    result = Pipeline(questions, settings, ResultCache(work / "cache"), progress=True).run(docs)
    rows = answer_rows(result, final_only=True)
    for row in rows:
        row["models"] = list(row["models"])
    out.write_text(json.dumps(rows), encoding="utf-8")
    log.info("%s: %d answers in %.0f s", name, len(rows), time.perf_counter() - started)
    return rows


def adapt_fold(reader: str, data: Path, raw_gold: dict, papers: list[str], work: Path, extra: list[str],
               read: str) -> Path:
    """The reader adapted on ``papers`` through the command line's --gold form (resumes from its checkpoints); its
    calibrator's fold readers read as the benchmark's runs do (``--calibration-read``)."""
    from mlpsych.cli import main as cli

    out = work / "reader"
    if (out / "model.safetensors").is_file():
        return out
    gold_file = work / "gold.json"
    gold_file.write_text(json.dumps({q: {p: v for p, v in by.items() if p in papers} for q, by in raw_gold.items()}),
                         encoding="utf-8")
    started = time.perf_counter()
    code = cli(["adapt", "--reader", reader, "--texts", str(data / "text.json"), "--gold", str(gold_file),
                "--out", str(out), "--checkpoints", str(work / "checkpoints"), "--calibration-read", read, *extra])
    if code != 0:
        raise SystemExit(f"adapt failed with exit code {code}")
    seconds = time.perf_counter() - started
    (work / "adapt-seconds.json").write_text(json.dumps({"seconds": seconds}), encoding="utf-8")
    log.info("adapted on %d papers in %.0f s", len(papers), seconds)
    return out


def scores(gold: dict, rows: list[dict], asked: list[str], papers: list[str], arm: str) -> dict[str, list]:
    """Per question, one ItemScore per paper (the plan's fixed order), every row scored as one model, ``arm``.

    Each fold's adapted reader is its own folder, so its rows name another model, and `mlpsych eval` scores each
    model on every paper: without one name, each fold's reader would be scored on the other folds' papers as if it
    had answered nothing there."""
    texts = {p: "" for p in papers}
    ran = [{"paper_id": p, "status": "ok"} for p in papers]
    # only the papers asked for (a paper in the rows would be scored even if not asked for)
    mine = [{**r, "models": [arm]} for r in rows if r["paper_id"] in texts]
    table = ev.evaluate(gold, mine, questions=asked, texts=texts, papers=ran)
    assert len({row.question for row in table}) == len(table), "one scored row per question"
    return {row.question: row.items for row in table}


@dataclass
class FoldRun:
    """One fold's adaptation: the papers coded, the papers scored, the adapted reader's final answer rows (every
    question read with it) and the questions a run gives it (``mlpsych run --adapted``: enough coded answers)."""

    coded: list[str]
    test: list[str]
    rows: list[dict]
    answered: tuple[str, ...] = ()


def as_run_reads(runs: list[FoldRun], zero: list[dict]) -> list[dict]:
    """The answers ``mlpsych run --adapted`` gives: the adapted reader's for the questions it answers, the base
    (zero-shot) reader's for the others (too few coded answers)."""
    out = []
    for run in runs:
        test = set(run.test)
        out += [r for r in run.rows if r["question_id"] in run.answered]
        out += [r for r in zero if r["paper_id"] in test and r["question_id"] not in run.answered]
    return out


def confidence(runs: list[FoldRun], zero: list[dict], texts: dict[str, str], kinds: dict[str, str], label,
               readers: list[Path] | None = None) -> dict[tuple[str, str], tuple[list[float], list[bool]]]:
    """Confidence and gold labels of the scored answers, pooled over the folds, per (answers, calibrator).

    Each fold's calibrator is fitted on its coded papers only: on their zero-shot answers (what a study has before
    adapting), and, for the adapted reader's answers, also on the adapted answers of its coded papers, which the
    fold before's reader gave (what a study has once it has coded answers of an adapted reader). That second
    calibrator needs three folds or more: with two, the fold before's reader learnt from the papers scored, and
    none is fitted. With the fold ``readers``, also the calibrator ``mlpsych adapt`` wrote in the folder
    (cross-fitted on its coded papers): on every answer of the reader ("adapted"), and as ``mlpsych run
    --adapted`` calibrates ("as run": the reader's for the questions it answers, the zero-shot answers' calibrator
    for the base reader's answers to the others)."""
    from mlpsych.coding.crossfit import reader_calibrator

    pooled: dict[tuple[str, str], tuple[list[float], list[bool]]] = {}
    by_test = {tuple(run.test): run for run in runs}

    def fitted(name: str, train: list[dict], papers: list[str]) -> cf.Calibrator | None:
        data = cf.labelled(train, texts, kinds, label)
        try:
            return cf.fit(data.x, data.y, {"papers": papers}, groups=data.papers)
        except cf.CalibratorError as error:  # e.g. no answer of these papers is correct
            log.warning("%s: no calibrator on %s (%s); these papers get no confidence figures", name, papers[0], error)
            return None

    def add(name: str, fitted_on: str, scored: list[dict], predict) -> None:
        test = cf.labelled(scored, texts, kinds, label)
        p, y_all = pooled.setdefault((name, fitted_on), ([], []))
        p.extend(predict(test))
        y_all.extend(test.y)

    for i, run in enumerate(runs):
        coded, test = set(run.coded), set(run.test)
        base = fitted("zero-shot", [r for r in zero if r["paper_id"] in coded], run.coded)
        if base is not None:
            add("zero-shot", "zero-shot answers", [r for r in zero if r["paper_id"] in test], lambda t: base.predict(t.x))
            add("adapted", "zero-shot answers", run.rows, lambda t: base.predict(t.x))
            if set(run.answered) != {r["question_id"] for r in run.rows}:  # some questions kept the base reader
                add("as run", "zero-shot answers", as_run_reads([run], zero), lambda t: base.predict(t.x))
        before = by_test.get(tuple(run.coded))
        if before is not None and not set(before.coded) & test:
            earlier = fitted("adapted", before.rows, run.coded)
            if earlier is not None:
                add("adapted", "adapted answers", run.rows, lambda t: earlier.predict(t.x))
        path = reader_calibrator(str(readers[i])) if readers else None
        if readers and path is None:
            log.warning("%s has no calibrator of its own", readers[i])
        if path is not None:
            own = cf.Calibrator.load(path)
            add("adapted", OWN, run.rows, lambda t: own.predict(t.x))
            if base is not None:
                add("as run", OWN, as_run_reads([run], zero), lambda t: np.where(
                    np.isin(t.questions, list(run.answered)), own.predict(t.x), base.predict(t.x)))
    return pooled


def _fmt(value: float, interval: tuple[float, float] | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    text = f"{value:+.3f}" if interval is not None else f"{value:.3f}"
    return text + (f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval is not None else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the MLPsych folder (text.json, answers_dev.json)")
    parser.add_argument("--reader", default=None, help="the stand-in SQuAD2 reader folder")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="instead of --reader: a train-reader checkpoint folder (step-NNNNNNN) made a reader")
    parser.add_argument("--work", type=Path, required=True, help="where every step is kept (resumable)")
    parser.add_argument("--k", default="17", help="coded papers per adaptation, e.g. 17,8,4")
    parser.add_argument("--questions", default="q1,q2,q3")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--papers", type=int, default=None, help="only the first N papers (a quick check)")
    parser.add_argument("--folds", default=None,
                        help="only these folds, e.g. 1 (to run folds side by side); figures on the papers they score")
    parser.add_argument("--read", choices=["all", "retrieve"], default="all",
                        help="windows read: every one (the default run), or the templates' retrieval budgets "
                             "(`mlpsych run --read retrieve`: about a tenth of the windows, the same for both readers)")
    parser.add_argument("--adapt-args", default="--no-progress",
                        help="extra `mlpsych adapt` options (e.g. --replay FILE); part of the work folder's name")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.checkpoint:
        args.reader = reader_from_checkpoint(args.checkpoint, args.work)
    if not args.reader:
        parser.error("give --reader or --checkpoint")
    args.work = args.work / Path(args.reader).name  # one reader's steps kept apart from another's

    asked = [q for q in args.questions.split(",") if q]
    extra = args.adapt_args.split()
    gold, docs = development_set(args.data, args.papers)
    raw_gold = json.loads((args.data / "answers_dev.json").read_text(encoding="utf-8"))
    papers = [d.id for d in docs]
    by_id = {d.id: d for d in docs}
    texts = {d.id: d.text for d in docs}
    kinds = {q.id: q.kind for q in load_question_set("mlpsych").questions}
    args.work.mkdir(parents=True, exist_ok=True)
    log.info("reader %s; steps kept in %s", args.reader, args.work)
    zero = read(args.reader, docs, asked, args.work, f"zero-shot-{args.read}-{'-'.join(asked)}", args.read)
    variant = "-".join(a.strip("-").replace("/", "_") for a in extra if a != "--no-progress") or "default"

    for k in (int(v) for v in args.k.split(",")):
        folds = folds_of(papers, k)
        runs: list[FoldRun] = []
        readers: list[Path] = []
        seconds = []
        only = {int(v) for v in args.folds.split(",")} if args.folds else None
        for i, fold in enumerate(folds):
            if only is not None and i not in only:
                continue
            test = folds[(i + 1) % len(folds)]
            work = args.work / variant / f"k{k}" / f"fold{i}"
            work.mkdir(parents=True, exist_ok=True)
            reader = adapt_fold(args.reader, args.data, raw_gold, fold, work, extra, args.read)
            readers.append(reader)
            timing = work / "adapt-seconds.json"
            if timing.is_file():
                seconds.append(json.loads(timing.read_text())["seconds"])
            rows = read(str(reader), [by_id[p] for p in test], asked, work, f"scored-{args.read}-{'-'.join(asked)}",
                        args.read)
            runs.append(FoldRun(fold, test, rows, tuple(adapted_questions(reader))))
        adapted = [row for run in runs for row in run.rows]
        label = lambda row, item: cf.gold_label(item, gold)  # noqa: E731
        conf = confidence(runs, zero, texts, kinds, label, readers)
        scored = [p for p in papers if any(p in folds[(i + 1) % len(folds)] for i in range(len(folds))
                                           if only is None or i in only)]
        zero_items = scores(gold, zero, asked, scored, "zero-shot")
        arms = {"adapted": scores(gold, adapted, asked, scored, "adapted")}
        if any(set(asked) - set(run.answered) for run in runs):
            arms["as run"] = scores(gold, as_run_reads(runs, zero), asked, scored, "as run")
        figures: dict = {"k": k, "read": args.read, "reader": args.reader, "folds": [len(f) for f in folds],
                         "folds_run": sorted(only) if only is not None else "all", "papers_scored": len(scored),
                         "adapt_seconds": seconds, "answered": [list(run.answered) for run in runs]}
        print(f"\n## k = {k}: folds of {[len(f) for f in folds]} papers ({len(scored)} scored); adaptation "
              f"{', '.join(f'{s:.0f} s' for s in seconds) or 'timed in an earlier run'}\n")
        for arm, items in arms.items():
            print(f"\nadapted reader ({ARM_LABELS[arm]}); questions a fold's reader answered in the run: "
                  f"{[list(run.answered) for run in runs]}\n")
            print(f"| question | metric | zero-shot | {arm} | {arm} - zero-shot [95% paired bootstrap] |")
            print("|---|---|---:|---:|---:|")
            for q in asked:
                zq, aq = zero_items[q], items[q]
                for metric in METRICS:
                    z, a = aggregate(zq)[metric], aggregate(aq)[metric]
                    interval = bootstrap(aq, metric, args.bootstrap, 0, other=zq)
                    figures.setdefault(arm, {}).setdefault(q, {})[metric] = {"zero": z, "adapted": a, "diff": a - z,
                                                                            "ci": interval}
                    print(f"| {q} | {LABELS.get(metric, metric)} | {_fmt(z)} | {_fmt(a)} | {_fmt(a - z, interval)} |")
        print("\n| answers scored | calibrator fitted on the coded papers' | answers | correct | calibration error | "
              "Brier | wrong answers in least-sure 30% (most any order finds) |\n|---|---|---:|---:|---:|---:|---:|")
        figures["confidence"] = {}
        for (name, fitted_on), (p, y) in conf.items():
            r = cf.report(p, y)
            figures["confidence"][f"{name} ({fitted_on})"] = vars(r)
            print(f"| {name} | {fitted_on} | {r.answers} | {r.correct} | {r.ece:.3f} | {r.brier:.3f} | "
                  f"{r.wrong_found:.0%} ({r.wrong_found_best:.0%}) |")
        suffix = "" if only is None else "-folds" + "-".join(map(str, sorted(only)))
        out = args.work / variant / f"results-k{k}-{args.read}{suffix}.json"
        out.write_text(json.dumps(figures, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
