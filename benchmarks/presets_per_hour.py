"""Papers per hour of the presets on one machine (on a GPU where there is one): the cost of reading, measured with
random-weight readers in the real architectures.

    python benchmarks/presets_per_hour.py --data ../shared/mlpsych --papers 6 --presets paper,reference,fast \
        --device cuda [--dtype bf16] [--batch-size 32]

Every reader the presets' questions name (the template's four large SQuAD2 readers for ``paper``, the default; the
base-size readers and the MiniLM small reader for ``fast``) is built with random weights in its real architecture
(``mlpsych.dev.tiny.build_model_with_config``; ``--size tiny`` builds the tiny ones instead, to check the script on
a CPU). Each preset then runs the pipeline, LLM stage off, from an empty cache: one paper untimed (the process's
first reads pay for kernel set-up), then the next ``--papers`` papers of the development set, timed, model
loading included (a run loads each model once). q4 asks about q1's answers, and with random weights those answers
are noise (about 27 a paper with the tiny readers), so each paper's q4 asks ``--sub-questions`` of them (default
8: the reference arm's q1 answers per paper with the trained stand-in, benchmarks/README.md, answer_quality); the
count asked is printed beside the time (the reference preset's "every entity" is capped the same way). Each preset
reads in its own dtype (``auto``: bf16 on such a GPU; the reference's fp32) unless ``--dtype`` names one for all.
Printed per preset: seconds, papers per hour, windows read, the readers' GFLOPs (the run sheet's count) and the
TFLOP/s they achieved, against a matrix product in the dtype the preset reads, measured in the same process.
Measurements, not pass/fail.

A run loads each model once per stage, whatever the number of papers, so a few papers overstate the cost of a
large study. ``--papers 6,30`` times each preset on the first 6 and, from another empty cache, the first 30
papers, and prints the cost of the 24 more: the papers per hour of a long run, loading excluded. ``--profile DIR``
writes there a cProfile of one more run of each preset on the fewest papers (the functions with the most time;
untimed, as profiling slows Python). ``--answers FILE`` writes the answers of each preset's run on the most papers
(JSON lines, in the run's order), so two checkouts' runs on one machine can be compared answer for answer.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._devset import development_set  # noqa: E402
from mlpsych.cache import ResultCache  # noqa: E402
from mlpsych.pipeline import Pipeline  # noqa: E402
from mlpsych.questions import load_question_set  # noqa: E402
from mlpsych.settings import RunSettings, apply_preset, substitute_models  # noqa: E402

log = logging.getLogger("presets-per-hour")

# The architecture of each Hub reader the presets name (family and size of mlpsych.dev.tiny.REAL_SIZES).
ARCHITECTURES: dict[str, tuple[str, str]] = {
    "deepset/deberta-v3-large-squad2": ("deberta-v2", "large"),
    "ahotrod/albert_xxlargev1_squad2_512": ("albert", "xxlarge"),
    "ahotrod/electra_large_discriminator_squad2_512": ("electra", "large"),
    "deepset/roberta-large-squad2": ("roberta", "large"),
    "deepset/deberta-v3-base-squad2": ("deberta-v2", "base"),
    "deepset/electra-base-squad2": ("electra", "base"),
    "deepset/minilm-uncased-squad2": ("bert", "minilm-l12"),
}


def build(model: str, size: str, work: Path, texts: list[str]) -> str:
    """A random-weight stand-in for ``model``: its real architecture, or the tiny one of its family."""
    from mlpsych.dev import tiny

    family, real = ARCHITECTURES[model]
    out = work / f"{family}-{real if size == 'real' else 'tiny'}"
    if not (out / "config.json").is_file():
        if size == "real":
            tiny.build_model_with_config(family, out, size=real, tokenizer_texts=texts)
        else:
            tiny.build_tiny_model(family, out)
    return str(out)


def configured(preset: str, models: dict[str, str], device: str, dtype: str, batch_size: int | None,
               sub_questions: int):
    """The template's questions and the preset's settings with the built readers in every slot, LLM stage off, q4
    asking about at most ``sub_questions`` q1 answers."""
    library = load_question_set("mlpsych")
    library = library.model_copy(update={"questions": [
        q.model_copy(update={"max_sub_questions": sub_questions}) if q.bridge_from else q for q in library.questions]})
    questions, settings = apply_preset(preset, library, RunSettings())
    data = settings.model_dump()
    data["llm"]["enabled"] = False
    data["max_sub_questions"] = sub_questions
    data["reader"].update(device=device, batch_size=batch_size)
    if dtype != "preset":
        data["reader"]["dtype"] = dtype
    cascade = data["retrieval"]["cascade"]
    if cascade.get("model"):
        cascade["model"] = models[cascade["model"]]
    return substitute_models(questions, models), RunSettings.model_validate(data)


def matmul_tflops(device: str, dtype: str, size: int | None = None) -> float:
    """TFLOP/s of a square matrix product in ``dtype`` (torch's name: "bfloat16", "float32", ...) in this process
    (``size``, default 8192 on a GPU, 2048 on a CPU), mean of timed repeats."""
    import torch

    size = size or (8192 if device.startswith("cuda") else 2048)
    kind = getattr(torch, dtype)
    a = torch.randn(size, size, device=device, dtype=kind)
    b = torch.randn(size, size, device=device, dtype=kind)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    for _ in range(3):
        a @ b
    sync()
    repeats = 10 if device.startswith("cuda") else 3
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync()
    return 2 * size**3 * repeats / (time.perf_counter() - started) / 1e12


def timed_run(questions, settings, warm, papers, profile: Path | None):
    """One preset on ``papers`` from an empty cache (after ``warm`` in another): the pipeline, its result and the
    seconds; with ``profile``, cProfile's top functions written there."""
    with tempfile.TemporaryDirectory() as cache_dir:
        Pipeline(questions, settings, ResultCache(Path(cache_dir) / "warm"), progress=False).run([warm])
        pipeline = Pipeline(questions, settings, ResultCache(Path(cache_dir) / "timed"), progress=False)
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        result = pipeline.run(papers)
        seconds = time.perf_counter() - started
        if profiler:
            profiler.disable()
            text = io.StringIO()
            stats = pstats.Stats(profiler, stream=text)
            for order in ("tottime", "cumulative"):
                stats.sort_stats(order).print_stats(40)
            profile.write_text(text.getvalue(), encoding="utf-8")
    return pipeline, result, seconds


def write_answers(path: Path, preset: str, result) -> None:
    """Append a run's answers: where each came from and what it says, scores rounded past bf16's noise floor."""
    with path.open("a", encoding="utf-8") as out:
        for a in result.answers:
            out.write(json.dumps({"preset": preset, "doc": a.doc_id, "question": a.question_id, "stage": str(a.stage),
                                  "entity": a.bridge_entity, "models": a.models, "start": a.start, "end": a.end,
                                  "text": a.text, "score": round(a.score, 6), "final": a.final}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the MLPsych folder (text.json, answers_dev.json)")
    parser.add_argument("--papers", default="4", help="papers timed (after one untimed paper); several, comma "
                                                      "separated, for the cost of the papers added")
    parser.add_argument("--presets", default="paper,fast")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="preset",
                        help="the readers' dtype for every preset (auto, fp32, bf16, fp16); default: each preset's")
    parser.add_argument("--batch-size", type=int, default=None, help="windows per forward pass (default: the "
                                                                     "reader's for the device)")
    parser.add_argument("--size", choices=["real", "tiny"], default="real")
    parser.add_argument("--sub-questions", type=int, default=8, help="q1 answers each paper's q4 asks about")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "mlpsych-presets-per-hour")
    parser.add_argument("--matmul-size", type=int, default=None,
                        help="side of the square matrix product measured (default 8192 on a GPU, 2048 on a CPU)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--profile", type=Path, default=None, help="a folder for cProfile's text of one more run of "
                                                                   "each preset")
    parser.add_argument("--answers", type=Path, default=None, help="write the answers of each preset's run on the "
                                                                   "most papers here (JSON lines)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    counts = sorted({int(n) for n in args.papers.split(",") if n})
    _, docs = development_set(args.data, counts[-1] + 1)
    warm, timed = docs[0], docs[1:]
    names = [p for p in args.presets.split(",") if p]
    needed = set()
    for preset in names:
        questions, settings = apply_preset(preset, load_question_set("mlpsych"), RunSettings())
        needed |= {m for q in questions.questions for m in q.models}
        needed |= {settings.retrieval.cascade.model} - {None}
    started = time.perf_counter()
    models = {m: build(m, args.size, args.work, [d.text for d in docs]) for m in sorted(needed)}
    log.info("built %d readers in %.0f s", len(models), time.perf_counter() - started)
    from mlpsych.models import dtype_name

    runs = {preset: configured(preset, models, args.device, args.dtype, args.batch_size, args.sub_questions)
            for preset in names}
    dtypes = {preset: dtype_name(settings.reader.dtype, args.device) for preset, (_, settings) in runs.items()}
    # Each preset's share is of a matrix product in the dtype it reads: a bf16 product on a CPU without bf16 is
    # emulated (minutes, and nothing to compare an fp32 run with).
    peaks = {dtype: matmul_tflops(args.device, dtype, args.matmul_size) for dtype in dict.fromkeys(dtypes.values())}
    print()
    for dtype, peak in peaks.items():
        print(f"matrix product in this process ({args.device}, {dtype}): {peak:.1f} TFLOP/s")
    print(f"readers: {args.size} architectures, random weights; papers timed: "
          + ", ".join(f"{n} ({sum(len(d.text.split()) for d in timed[:n]) / n:.0f} words on average)"
                      for n in counts) + "\n")
    print("| preset | dtype | papers | seconds | papers per hour | windows read | q4 sub-questions | reader TFLOPs | "
          "TFLOP/s achieved | share of the matrix product |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    figures = {"device": args.device, "dtype": args.dtype, "matmul_tflops": peaks, "presets": {}}
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.answers:
        args.answers.write_text("", encoding="utf-8")
    for preset, (questions, settings) in runs.items():
        dtype, peak = dtypes[preset], peaks[dtypes[preset]]
        rows = figures["presets"][preset] = {}
        if args.profile:
            timed_run(questions, settings, warm, timed[:counts[0]], args.profile / f"{preset}-{counts[0]}.txt")
        for n in counts:
            pipeline, result, seconds = timed_run(questions, settings, warm, timed[:n], None)
            tflops = sum(v or 0.0 for v in result.info.reader_gflops.values()) / 1e3
            follow_ups = len({(a.doc_id, a.bridge_entity) for a in result.answers if a.question_id == "q4"})
            row = rows[n] = {
                "dtype": dtype, "seconds": seconds, "papers_per_hour": 3600 * n / seconds,
                "mean_words": sum(len(d.text.split()) for d in timed[:n]) / n, "windows": pipeline.windows_read,
                "q4_sub_questions": follow_ups, "reader_tflops": tflops, "tflops_per_s": tflops / seconds,
                "share": tflops / seconds / peak, "gflops_by_model": result.info.reader_gflops,
                "errors": {k: v[:1] for k, v in result.errors.items()}}
            print(f"| {preset} | {dtype} | {n} | {seconds:.1f} | {row['papers_per_hour']:.0f} | {row['windows']} | "
                  f"{follow_ups} | {tflops:.1f} | {row['tflops_per_s']:.2f} | {row['share']:.1%} |", flush=True)
            if result.errors:
                log.warning("%s: errors %s", preset, row["errors"])
        if args.answers:
            write_answers(args.answers, preset, result)
    for preset, rows in figures["presets"].items():
        for low, high in zip(counts, counts[1:]):
            extra = rows[high]["seconds"] - rows[low]["seconds"]
            print(f"{preset}: papers {low + 1}-{high} took {extra:.1f} s more than the first {low}: "
                  f"{3600 * (high - low) / extra:.0f} papers per hour beyond the first {low} (model loading "
                  "excluded; different papers)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
