"""Windows per second of the extractive reader, for a model, batch sizes and dtypes.

    python benchmarks/reader_speed.py --model deepset/deberta-v3-large-squad2 --batch-size 8 --device cuda
    python benchmarks/reader_speed.py --tiny deberta-v2 --size large      # random weights, real architecture
    python benchmarks/reader_speed.py --tiny electra --size base --dtype fp32 bf16 --repeat 3 --max-length 384
    python benchmarks/reader_speed.py --tiny bert --size minilm-l6 --dtype fp32 bf16 --repeat 3 --papers 18 --data D

Reads the same text (an MLPsych paper with --data, else the examples) for one question, after one warm-up
window batch, and prints windows/s, seconds per paper and the window count for every (batch size, dtype).
With several configurations each is loaded once and they are read in turn ``--repeat`` times (interleaved, so a
slow spell of a shared machine falls on all of them); the median is reported, and with several dtypes the
speed of each against the first one, per repetition too. With ``--papers N`` a repetition is a whole run
instead: the pipeline from an empty cache, q1-q3 of the mlpsych template with the fast preset's retrieval on
the first N MLPsych papers, the model reading every question (model loading, retrieval and decoding included).
Prints measurements, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from mlpsych.documents import Document
from mlpsych.models import dtype_name
from mlpsych.reading.reader import Query, Reader
from mlpsych.settings import ReaderSettings

QUESTION = "What machine learning or natural language processing techniques were used?"


def paper(data: Path | None, index: int) -> Document:
    if data:
        texts = json.loads(json.loads((data / "text.json").read_text()))
        key = sorted(texts)[index]
        return Document(id=key, text=texts[key])
    folder = Path(__file__).resolve().parent.parent / "examples" / "papers"
    return Document(id="examples", text="\n\n".join(p.read_text() for p in sorted(folder.glob("*.txt"))))


def tiny_model(family: str, size: str, out: Path) -> str:
    from mlpsych.dev import tiny as testing

    if size == "tiny":
        return str(testing.build_tiny_model(family, out / family))
    return str(testing.build_model_with_config(family, out / family, size=size))


def cut(doc: Document, reader: Reader, max_windows: int) -> Document:
    """The paper up to the end of its ``max_windows``-th window (all of it for 0)."""
    if not max_windows:
        return doc
    windows = reader.windows(doc)[:max_windows]
    return Document(id=doc.id, text=doc.text[: windows[-1].char_end])


def timed_read(reader: Reader, doc: Document) -> float:
    """Seconds to read the whole paper for one question."""
    reader.windows_read = 0
    started = time.perf_counter()
    reader.run(doc, [Query("q1", QUESTION, 20, 30)])
    return time.perf_counter() - started


def timed_run(model: str, reader: ReaderSettings, docs: list[Document]) -> tuple[float, int]:
    """Seconds and windows read of a whole fast-preset run of q1-q3 by ``model``, from an empty cache."""
    from mlpsych.cache import ResultCache
    from mlpsych.pipeline import Pipeline
    from mlpsych.questions import load_question_set
    from mlpsych.settings import LLMSettings, apply_preset, substitute_models

    questions, settings = apply_preset("fast", load_question_set("mlpsych").select(["q1", "q2", "q3"]))
    questions = substitute_models(questions, {m: model for q in questions.questions for m in q.models})
    settings = settings.model_copy(update={"reader": reader, "llm": LLMSettings(enabled=False)})
    with tempfile.TemporaryDirectory() as cache:
        pipeline = Pipeline(questions, settings, ResultCache(cache), progress=False)
        started = time.perf_counter()
        pipeline.run(docs)
        return time.perf_counter() - started, pipeline.windows_read


def versus(first: list[float], times: list[float]) -> str:
    """How much faster ``times`` are than ``first`` (seconds of the same work): medians, and per repetition."""
    each = ", ".join(f"{a / b:.2f}" for a, b in zip(first, times))
    return f"{statistics.median(first) / statistics.median(times):.2f}x (repetitions {each})"


def compare_reads(model: str, args: argparse.Namespace) -> None:
    """One paper read for one question per (batch size, dtype), interleaved; medians and ratios printed."""
    configs = [(batch_size, dtype) for batch_size in args.batch_size for dtype in args.dtype]
    readers = {}
    for batch_size, dtype in configs:
        reader = Reader(model, ReaderSettings(max_length=args.max_length, batch_size=batch_size or None,
                                              device=args.device, dtype=dtype))
        reader.warm_up()
        readers[(batch_size, dtype)] = reader
    doc = cut(paper(args.data, args.paper), next(iter(readers.values())), args.max_windows)
    for reader in readers.values():
        reader.run(doc, [Query("w", QUESTION, 5, 30, windows=(0,))])  # warm-up batch
    seconds: dict[tuple[int, str], list[float]] = {config: [] for config in configs}
    for _ in range(args.repeat):
        for config in configs:
            seconds[config].append(timed_read(readers[config], doc))
    for (batch_size, dtype), times in seconds.items():
        reader = readers[(batch_size, dtype)]
        median = statistics.median(times)
        line = (f"model={Path(model).name} device={reader.device} dtype={dtype_name(dtype, reader.device, int8=True)} "
                f"batch={batch_size or 'auto'} windows={reader.windows_read} ({len(reader.windows(doc))} in paper) "
                f"max_length={reader.max_length} seconds={median:.2f} windows/s={reader.windows_read / median:.2f} "
                f"tokens/paper={len(reader.encode(doc).ids)}")
        if dtype != args.dtype[0]:
            line += f" speed vs {args.dtype[0]}={versus(seconds[(batch_size, args.dtype[0])], times)}"
        print(line, flush=True)


def compare_runs(model: str, args: argparse.Namespace) -> None:
    """``--papers``: whole runs per dtype, interleaved, after an untimed one each; medians and ratios printed."""
    texts = json.loads(json.loads((args.data / "text.json").read_text()))
    docs = [Document(id=key, text=texts[key]) for key in sorted(texts)[: args.papers]]
    readers = {dtype: ReaderSettings(max_length=args.max_length, device=args.device, dtype=dtype)
               for dtype in args.dtype}
    for reader in readers.values():  # one-time costs (imports, first batches) fall on no timed run
        timed_run(model, reader, docs[:1])
    seconds: dict[str, list[float]] = {dtype: [] for dtype in args.dtype}
    for _ in range(args.repeat):
        for dtype, reader in readers.items():
            spent, windows = timed_run(model, reader, docs)
            seconds[dtype].append(spent)
    for dtype, times in seconds.items():
        print(f"model={Path(model).name} papers={len(docs)} dtype={dtype} windows={windows} "
              f"seconds={statistics.median(times):.1f} (repetitions {', '.join(f'{t:.1f}' for t in times)}) "
              f"speed vs {args.dtype[0]}={versus(seconds[args.dtype[0]], times)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="Hub id or folder of a SQuAD2 model")
    parser.add_argument("--tiny", help="build a random-weight model of this family instead (deberta-v2, albert, ...)")
    parser.add_argument("--size", default="tiny",
                        help="with --tiny: tiny, or a real configuration size (base, large, minilm-l6 for bert)")
    parser.add_argument("--data", type=Path, help="MLPsych folder (text.json); default: the examples")
    parser.add_argument("--paper", type=int, default=0, help="which MLPsych paper (sorted ids)")
    parser.add_argument("--max-windows", type=int, default=0, help="cut the paper to about this many windows")
    parser.add_argument("--max-length", type=int, default=None, help="window length in tokens (default: model's)")
    parser.add_argument("--batch-size", type=int, nargs="+", default=[0],
                        help="windows per forward pass; 0: the reader's default for the device and model")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", nargs="+", default=["auto"], help="one or more of auto, fp32, bf16, fp16, int8")
    parser.add_argument("--repeat", type=int, default=1, help="interleaved repetitions of every configuration")
    parser.add_argument("--papers", type=int, default=0, help="time whole runs over this many papers (needs --data)")
    args = parser.parse_args()
    if not (args.model or args.tiny):
        parser.error("give --model or --tiny")
    if args.papers and not args.data:
        parser.error("--papers needs --data")
    with tempfile.TemporaryDirectory(prefix="mlpsych-speed-") as work:  # a random-weight large model takes GBs
        model = args.model or tiny_model(args.tiny, args.size, Path(work))
        if args.papers:
            compare_runs(model, args)
        else:
            compare_reads(model, args)


if __name__ == "__main__":
    main()
