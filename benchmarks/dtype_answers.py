"""What another dtype (bf16, int8) changes in the answers of a real reader, against the first (fp32): same papers,
same reader, several dtypes.

    python benchmarks/dtype_answers.py --data ../shared/mlpsych --reader READER_FOLDER [--dtypes fp32,bf16,int8]

READER_FOLDER is a trained SQuAD2 reader (e.g. the output of `mlpsych dev train-reader`). Every template model of
the questions is replaced by it, every window of every development paper is read (the `paper` preset's full read),
the LLM stage is off, and each dtype runs with its own empty cache, one after the other, timed. Printed: per
question, the scores (F1, EM, Mentions as the paper computes them, and the precision-aware micro F1; `mlpsych eval`'s
rules) in each dtype, F1 on each half of the papers (A, B: alternate papers, as answer_quality.py) with its
difference from the first dtype, how many paper-question answer sets of each dtype differ from the first's, and
the seconds of each run (one run each: these machines are noisy, so the ratios are the figures to read; each dtype
first reads one paper untimed, since a process's first run pays for torch's kernel set-up, and ONNX Runtime's
export is made then). ``onnxruntime:fp32`` and ``onnxruntime:int8`` read with ONNX Runtime (``runtime`` in the
reader settings) instead of torch.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._devset import development_set, split_halves  # noqa: E402
from mlpsych.cache import ResultCache  # noqa: E402
from mlpsych.documents import Document  # noqa: E402
from mlpsych.evaluation import evaluate as ev  # noqa: E402
from mlpsych.export import answer_rows  # noqa: E402
from mlpsych.pipeline import Pipeline  # noqa: E402
from mlpsych.questions import load_question_set  # noqa: E402
from mlpsych.settings import LLMSettings, ReaderSettings, RetrievalSettings, RunSettings, substitute_models  # noqa: E402

METRICS = ("F1", "EMat", "Ment", "mF1")  # paper-style F1, EM and Mentions; MultiSpanQA-style micro F1


def run_dtype(arm: str, reader: str, questions, docs: list[Document], max_length: int) -> tuple[list[dict], float]:
    """Export rows of one full read in ``arm`` (a dtype, or RUNTIME:DTYPE; a fresh cache) and its seconds."""
    runtime, _, dtype = arm.rpartition(":")
    settings = RunSettings(reader=ReaderSettings(dtype=dtype, runtime=runtime or "torch", device="cpu",
                                                 max_length=max_length),
                           llm=LLMSettings(enabled=False), retrieval=RetrievalSettings(read="all"))
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = ResultCache(cache_dir)
        started = time.perf_counter()
        result = Pipeline(questions, settings, cache, progress=True).run(docs)
        seconds = time.perf_counter() - started
        cache.close()
    return answer_rows(result, final_only=True), seconds


def answer_sets(rows: list[dict]) -> dict[tuple[str, str], frozenset[str]]:
    sets: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        sets.setdefault((row["paper_id"], row["question_id"]), set()).add(row["answer"])
    return {key: frozenset(texts) for key, texts in sets.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the MLPsych folder (text.json, answers_dev.json)")
    parser.add_argument("--reader", required=True, help="a trained reader folder standing in for every template model")
    parser.add_argument("--questions", default="q1,q2,q3")
    parser.add_argument("--papers", type=int, default=None, help="only the first N development papers")
    parser.add_argument("--max-length", type=int, default=384, help="window length (the pipeline's max_seq_len)")
    parser.add_argument("--dtypes", default="fp32,bf16", help="comma-separated; each a dtype (torch's) or "
                        "RUNTIME:DTYPE, e.g. fp32,onnxruntime:fp32,onnxruntime:int8")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    gold, docs = development_set(args.data, args.papers)
    ids = [d.id for d in docs]
    wanted = [q for q in args.questions.split(",") if q]
    library = load_question_set("mlpsych").select(wanted)
    questions = substitute_models(library, {m: args.reader for q in library.questions for m in q.models})
    gold = {q: {p: answers for p, answers in gold.get(q, {}).items() if p in ids} for q in wanted}

    texts = {d.id: d.text for d in docs}
    parts = {"all": ids, **split_halves(ids)}

    def scores(rows: list[dict], papers: list[str]) -> dict[str, dict[str, float]]:
        """Per question, the metrics of ``rows`` on ``papers`` (one reader: one table row each)."""
        kept = set(papers)
        table = ev.evaluate({q: {p: a for p, a in gold[q].items() if p in kept} for q in wanted},
                            [r for r in rows if r["paper_id"] in kept], questions=wanted,
                            texts={p: texts[p] for p in papers})
        return {row.question: row.metrics for row in table}

    runs = {}
    for dtype in args.dtypes.split(","):  # untimed warm-up: a process's first run pays for torch's kernel set-up
        run_dtype(dtype, args.reader, questions, docs[:1], args.max_length)
    for dtype in args.dtypes.split(","):
        rows, seconds = run_dtype(dtype, args.reader, questions, docs, args.max_length)
        runs[dtype] = (rows, seconds, {part: scores(rows, papers) for part, papers in parts.items()})
    names = list(runs)

    def metric(dtype: str, part: str, q: str, name: str = "F1") -> float:
        return runs[dtype][2][part].get(q, {}).get(name, float("nan"))

    print(f"{len(docs)} papers (halves A, B of {len(parts['A'])} and {len(parts['B'])}), reader "
          f"{Path(args.reader).name}, windows of {args.max_length} tokens, LLM off")
    print("| q | " + " | ".join(f"{d} {m}" for d in names for m in METRICS)
          + "".join(f" | {d}'s answer sets that differ from {names[0]}'s" for d in names[1:]) + " |")
    print("|---|" + "---|" * (len(names) * len(METRICS) + len(names) - 1))
    sets = {d: answer_sets(runs[d][0]) for d in names}
    for q in wanted:
        keys = {k for d in names for k in sets[d] if k[1] == q}
        differ = [sum(1 for k in keys if sets[d].get(k, frozenset()) != sets[names[0]].get(k, frozenset()))
                  for d in names[1:]]
        print(f"| {q} | " + " | ".join(f"{metric(d, 'all', q, m):.3f}" for d in names for m in METRICS)
              + "".join(f" | {count} of {len(keys)}" for count in differ) + " |")
    print(f"\nF1 per half, and its difference from {names[0]}:")
    print("| q | " + " | ".join(f"{d} A | {d} B" for d in names) + " |")
    print("|---|" + "---|---|" * len(names))
    for q in wanted:
        cells = []
        for d in names:
            for half in "AB":
                cell, first = metric(d, half, q), metric(names[0], half, q)
                cells.append(f"{cell:.3f}" + (f" ({cell - first:+.3f})" if d != names[0] else ""))
        print(f"| {q} | " + " | ".join(cells) + " |")
    print("seconds: " + ", ".join(f"{d} {runs[d][1]:.0f}" for d in names) + "; "
          + ", ".join(f"{runs[names[0]][1] / runs[d][1]:.2f}x faster than {names[0]}: {d}" for d in names[1:]))

if __name__ == "__main__":
    main()
