"""Where `mlpsych eval`'s time goes on a big study: planning, embedding the answers Similar Match compares, scoring.

    PYTHONPATH=. python benchmarks/eval_speed.py --pred run.jsonl --gold gold.json --texts texts.jsonl
    PYTHONPATH=. python benchmarks/eval_speed.py --pred run.jsonl --gold gold.json --no-similar

Prints the answers embedded (and how many the run holds in all, which is what was embedded before), the wall and
CPU seconds of each step and the peak resident memory. The table it scores is the one `mlpsych eval` prints; to
check that a change leaves the reports byte-identical, run `mlpsych eval --out` with the old and the new code and
compare the files (benchmarks/README.md, eval_speed).
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from mlpsych.cli.eval_cmd import _corpus
from mlpsych.embeddings import Embedder
from mlpsych.evaluation import evaluate as ev
from mlpsych.evaluation.similarity import EmbeddingSimilarity


class Clock:
    """Wall and CPU seconds since the last lap."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self, what: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        print(f"{what:<28} {wall - self.wall:8.1f} s wall {cpu - self.cpu:8.1f} s CPU")
        self.wall, self.cpu = wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pred", type=Path, required=True)
    parser.add_argument("--gold", type=Path, required=True)
    parser.add_argument("--texts", type=Path, default=None)
    parser.add_argument("--stage", default=ev.DEFAULT_STAGE)
    parser.add_argument("--no-similar", action="store_true")
    parser.add_argument("--embedder", default=None)
    args = parser.parse_args()

    clock = Clock()
    gold, rows = ev.load_gold(args.gold), ev.load_predictions(args.pred)
    texts = _corpus(args.texts) if args.texts else None
    clock.lap("read inputs")
    plan = ev.plan_scoring(gold, rows, None, texts, ev.DEFAULT_UNANSWERABLE, ev.load_run_papers(args.pred), True)
    compared = ev._compared_texts(ev._scored_tables(gold, plan, args.stage))
    clock.lap("plan")
    every = {str(r["answer"]).strip() for r in rows if str(r.get("answer") or "").strip()}
    print(f"answers compared (embedded): {len(compared)}; distinct answers of the run: {len(every)}")
    similarity = None
    if not args.no_similar:
        similarity = EmbeddingSimilarity(Embedder(args.embedder, device="cpu", progress=True))
        similarity.prepare(compared)
        clock.lap("embed")
    table = ev.evaluate(gold, rows, stage=args.stage, similarity=similarity, texts=texts,
                        papers=ev.load_run_papers(args.pred), progress=True)
    clock.lap("plan and score (evaluate)")
    print(f"{len(table)} table rows; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
