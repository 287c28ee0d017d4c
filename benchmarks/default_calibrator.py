"""Fit the confidence calibrator shipped with mlpsych (mlpsych/coding/default_calibrator.json) on the development
papers, and say how well such a calibrator does on papers it was not fitted on.

The answers: ``--answers RUN`` names the results of ``mlpsych run`` on the 34 development papers (q1-q3; the file
``mlpsych eval --pred`` reads), e.g. the default preset with the trained stand-in reader in every slot and the LLM
off, what the shipped file is fitted on. Without it, those of ``released_cases.jsonl``: the paper's released code
run with a small SQuAD2 reader (MiniLM-L6 + QA head) on each development paper, q1-q3; its ``final`` list is what
that code keeps for one model, an answer's reader score the best ``raw`` score of a span inside it (the released
merging keeps spans that touch). Labels: gold as ``mlpsych calibrate --gold`` judges (word-overlap F1 >= 0.5 with
a gold answer of the paper and question; q2 papers without gold: every answer wrong). Out of sample: two folds of
papers (first and second half of the gold's order), each scored by the calibrator fitted on the other, beside the
calibrator shipped now scored on the same answers; the file written by ``--write`` is then fitted on all 34.

    python benchmarks/default_calibrator.py --data ../shared/mlpsych [--answers RUN.jsonl --describe TEXT] [--write]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from mlpsych.coding import confidence as cf
from mlpsych.questions import load_question_set

OUT = Path(__file__).resolve().parents[1] / "mlpsych" / "coding" / cf.DEFAULT_FILE


def released_rows(data: Path, texts: dict[str, str]) -> list[dict]:
    """The released code's final answers as answer rows (one reader, so every answer has that one model)."""
    rows = []
    for line in (data / "released_cases.jsonl").read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        text = texts.get(case["paper_id"], "")
        for answer in case["final"]:
            inside = [r["score"] for r in case["raw"] if r["answer"].strip() and r["answer"].strip() in answer]
            start = text.find(answer)
            rows.append({"paper_id": case["paper_id"], "question_id": case["question_id"], "answer": answer,
                         "score": max(inside, default=0.0), "models": ["minilm"], "final": True,
                         "start": start if start >= 0 else None, "stage": "extractive"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/mlpsych"))
    parser.add_argument("--answers", type=Path, default=None,
                        help="results of `mlpsych run` on the development papers (default: the released code's)")
    parser.add_argument("--describe", default=None, help="what the --answers are, for the calibrator's description "
                        "(every run sheet shows it)")
    parser.add_argument("--write", action="store_true", help=f"write {OUT}")
    args = parser.parse_args()
    from mlpsych.evaluation import evaluate as ev

    texts = ev.load_texts(args.data / "text.json")
    gold = ev.gold_from_dict(json.loads((args.data / "answers_dev.json").read_text(encoding="utf-8")))
    kinds = {q.id: q.kind for q in load_question_set("mlpsych").questions}
    rows = ev.load_predictions(args.answers) if args.answers else released_rows(args.data, texts)
    shipped = cf.Calibrator.load()
    papers = list(gold["q1"])
    halves = [set(papers[: len(papers) // 2]), set(papers[len(papers) // 2:])]

    def data(keep: set[str]):
        return cf.labelled([r for r in rows if r["paper_id"] in keep], texts, kinds,
                           lambda row, item: cf.gold_label(item, gold))

    confidence, labels, before = [], [], []
    for fit_on, score_on in ((0, 1), (1, 0)):
        train = data(halves[fit_on])
        calibrator = cf.fit(train.x, train.y, {}, groups=train.papers)
        test = data(halves[score_on])
        confidence += list(calibrator.predict(test.x))
        before += list(shipped.predict(test.x))
        labels += list(test.y)
        print(f"fold fitted on half {fit_on + 1} (L2 {calibrator.fitted_on['l2']}): "
              f"{cf.report(calibrator.predict(test.x), test.y).line()}")
    print(f"both folds, out of sample: {cf.report(confidence, labels).line()}")
    print(f"the calibrator shipped now, same answers (in sample if it was fitted on them): "
          f"{cf.report(before, labels).line()}")
    print(f"base rate of correct answers: {np.mean(labels):.3f}")
    every = data(set(papers))
    source = args.describe or (f"answers of `mlpsych run` ({args.answers.name})" if args.answers
                               else "released code's answers with a MiniLM SQuAD2 reader")
    calibrator = cf.fit(every.x, every.y, {"description": f"34 development papers, {source} "
                                           "(benchmarks/default_calibrator.py)"},
                        groups=every.papers)
    print(f"all 34, in sample (L2 {calibrator.fitted_on['l2']}): {cf.report(calibrator.predict(every.x), every.y).line()}")
    print("weights:", {name: round(w, 3) for name, w in zip(cf.FEATURES, calibrator.weights)})
    if args.write:
        calibrator.save(OUT)
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
