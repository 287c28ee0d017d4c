"""This CPU's matmul throughput at reader shapes, and the share of it that the fast preset's reading achieves.

    python benchmarks/matmul_throughput.py [--repeat 5] [--rows 3072]
    python benchmarks/matmul_throughput.py --data ../shared/mlpsych --windows 8 --tflops small=2.50 base=6.41

Why: a reader's cost is its FLOPs (mlpsych.reading.cost); the seconds a paper takes can only fall to its FLOPs over
what the CPU multiplies per second. This measures that rate, so a run's seconds can be read as "how far from the
limit" rather than against an earlier run on another machine.

Part 1, matmul: GFLOP/s of a feed-forward product ``[rows, hidden] x [hidden, intermediate]`` (2 x rows x hidden x
intermediate FLOPs; rows = 8 windows x 384 tokens by default) at the sizes of MiniLM (384 x 1536), base (768 x 3072)
and large (1024 x 4096) readers, in fp32, bf16 and int8 (torch's dynamically quantized Linear, as the readers'
``dtype: int8`` runs it, activation quantization included), with torch's thread count as the machine gives it. Every
configuration is timed in turn ``--repeat`` times (interleaved, so a slow spell of a shared machine falls on all of
them); medians are printed.

Part 2, reading (``--data``): per level of the fast preset (the small reader, MiniLM-L12, over every window; the
base readers, DeBERTa-v3-base and ELECTRA-base, over the windows the cascade chooses), a random-weight reader in the
real architecture reads the first ``--windows`` windows of the mean-length development paper (512-token windows
and the reader's default batch, as the preset reads) for one question, per dtype, interleaved. Its FLOPs
(``cost.flops`` of the tokens it read) over its seconds are the rate reading achieves, printed with its share of
the matmul rate of the same size and dtype. With ``--tflops LEVEL=T`` (TFLOPs per mean paper of that level,
cascade_retrieval's table in benchmarks/README.md) each level's seconds per mean paper at the achieved rate and at
the matmul rate (the physical limit) are printed too. Prints measurements, not pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.reader_speed import QUESTION, tiny_model  # noqa: E402
from benchmarks.reader_vs_reference import load_papers  # noqa: E402
from mlpsych.documents import Document  # noqa: E402
from mlpsych.errors import ModelLoadError  # noqa: E402
from mlpsych.models import pick_dtype, quantize_linear_layers  # noqa: E402
from mlpsych.reading.cost import architecture, flops  # noqa: E402
from mlpsych.reading.reader import Query, Reader  # noqa: E402
from mlpsych.settings import ReaderSettings  # noqa: E402

SIZES = {"minilm": (384, 1536), "base": (768, 3072), "large": (1024, 4096)}  # hidden, intermediate
SIZE_OF_HIDDEN = {hidden: name for name, (hidden, _) in SIZES.items()}
# The fast preset's levels: the small reader over every window, the base readers over the windows chosen.
LEVELS = {"small": [("bert", "minilm-l12")], "base": [("deberta-v2", "base"), ("electra", "base")]}


@dataclass(frozen=True)
class Product:
    """One timed configuration: a linear layer of a reader size in a dtype, and its input."""

    size: str
    dtype: str
    layer: torch.nn.Module
    rows: torch.Tensor

    @property
    def flops(self) -> float:
        hidden, intermediate = SIZES[self.size]
        return 2.0 * self.rows.shape[0] * hidden * intermediate


def usable_dtypes(wanted: list[str]) -> list[str]:
    """The dtypes of ``wanted`` this torch runs on the CPU (int8 is skipped, with why, where it cannot)."""
    kept = []
    for name in wanted:
        try:
            pick_dtype(name, "cpu", int8=True)
        except ModelLoadError as error:
            print(f"skipped {name}: {error}")
            continue
        kept.append(name)
    return kept


def product(size: str, dtype: str, rows: int) -> Product:
    hidden, intermediate = SIZES[size]
    layer = torch.nn.Sequential(torch.nn.Linear(hidden, intermediate)).eval()
    inputs = torch.randn(rows, hidden)
    if dtype == "int8":
        quantize_linear_layers(layer)  # what the readers' dtype int8 does to their encoders
    elif dtype == "bf16":
        layer, inputs = layer.to(torch.bfloat16), inputs.to(torch.bfloat16)
    return Product(size, dtype, layer, inputs)


def timed(job, min_seconds: float) -> tuple[float, int]:
    """Seconds and calls of running ``job`` repeatedly for at least ``min_seconds``."""
    calls, started = 0, time.perf_counter()
    while True:
        job()
        calls += 1
        spent = time.perf_counter() - started
        if spent >= min_seconds:
            return spent, calls


def measure_matmuls(dtypes: list[str], rows: int, repeat: int, min_seconds: float) -> dict[tuple[str, str], float]:
    """Median GFLOP/s per (size, dtype), the configurations timed in turn ``repeat`` times."""
    products = [product(size, dtype, rows) for size in SIZES for dtype in dtypes]
    rates: dict[tuple[str, str], list[float]] = {(p.size, p.dtype): [] for p in products}
    with torch.inference_mode():
        for p in products:  # warm-up: kernels chosen, caches filled
            p.layer(p.rows)
        for _ in range(repeat):
            for p in products:
                seconds, calls = timed(lambda p=p: p.layer(p.rows), min_seconds)
                rates[(p.size, p.dtype)].append(p.flops * calls / seconds / 1e9)
    print(f"\nmatmul [{rows}, hidden] x [hidden, intermediate], torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, median GFLOP/s of {repeat} (all repetitions)")
    for (size, dtype), values in rates.items():
        print(f"  {size:<7} {dtype:<5} {statistics.median(values):8.1f}   ({', '.join(f'{v:.1f}' for v in values)})")
    return {key: statistics.median(values) for key, values in rates.items()}


def measure_reading(data: Path, dtypes: list[str], windows: int, repeat: int, work: Path,
                    peak: dict[tuple[str, str], float], tflops: dict[str, float]) -> None:
    """Per level and dtype: the reading's achieved GFLOP/s, its share of the matmul rate, seconds per mean paper."""
    chosen = load_papers(data, 1, 0, pick="mean")[0]
    doc = Document(id=chosen["id"], text=chosen["text"])
    query = [Query("q1", QUESTION, 20, 30, windows=tuple(range(windows)))]
    readers = {}
    for level, models in LEVELS.items():
        for family, size in models:
            model = tiny_model(family, size, work)
            for dtype in dtypes:
                reader = Reader(model, ReaderSettings(max_length=None, device="cpu", dtype=dtype))
                reader.warm_up()
                reader.run(doc, [Query("w", QUESTION, 5, 30, windows=(0,))])  # first batch: one-time set-up
                readers[(level, f"{family}-{size}", dtype)] = reader
    seconds: dict[tuple[str, str, str], list[float]] = {key: [] for key in readers}
    for _ in range(repeat):
        for key, reader in readers.items():
            reader.tokens_read = reader.windows_read = 0
            started = time.perf_counter()
            reader.run(doc, query)
            seconds[key].append(time.perf_counter() - started)
    print(f"\nreading: paper {doc.id} (mean length, {len(doc.text.split())} words), its first {windows} windows, "
          f"one question, median seconds of {repeat}")
    for (level, name, dtype), times in seconds.items():
        reader = readers[(level, name, dtype)]
        achieved = flops(reader.model_id, reader.tokens_read) / statistics.median(times) / 1e9
        limit = peak[(SIZE_OF_HIDDEN[architecture(reader.model_id).hidden], dtype)]
        line = (f"  {level:<5} {name:<16} {dtype:<5} windows/s {reader.windows_read / statistics.median(times):5.2f}"
                f"  GFLOP/s {achieved:7.1f}  share of matmul {achieved / limit:5.2f}")
        if level in tflops:
            line += (f"  s per mean paper ({tflops[level]} TFLOPs): {tflops[level] * 1e3 / achieved:6.1f} read,"
                     f" {tflops[level] * 1e3 / limit:6.1f} at the matmul rate")
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16", "int8"])
    parser.add_argument("--rows", type=int, default=8 * 384, help="input rows of a product (windows x tokens)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repetitions of every configuration")
    parser.add_argument("--min-seconds", type=float, default=0.5, help="time of one measurement of a product")
    parser.add_argument("--data", type=Path, help="MLPsych folder (text.json): also measure the readers' rate")
    parser.add_argument("--windows", type=int, default=8, help="windows of the mean paper each reader reads")
    parser.add_argument("--reading-repeat", type=int, default=3, help="interleaved repetitions of the reading")
    parser.add_argument("--tflops", nargs="*", default=[], metavar="LEVEL=T",
                        help="TFLOPs per mean paper of a level (small, base): seconds per paper printed")
    args = parser.parse_args()
    tflops = {level: float(value) for level, value in (item.split("=") for item in args.tflops)}
    dtypes = usable_dtypes(args.dtypes)
    peak = measure_matmuls(dtypes, args.rows, args.repeat, args.min_seconds)
    if args.data:
        with tempfile.TemporaryDirectory(prefix="mlpsych-throughput-") as work:
            measure_reading(args.data, dtypes, args.windows, args.reading_repeat, Path(work), peak, tflops)


if __name__ == "__main__":
    main()
