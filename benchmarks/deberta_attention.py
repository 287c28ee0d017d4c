"""Where DeBERTa-v3's time goes on a CPU, per dtype: the linear layers, the attention products, and the gather of
relative positions (the fast preset's q1, q3 and q4 reader; issue 26).

    python benchmarks/deberta_attention.py [--size base] [--windows 4] [--repeat 3]

Why: profiled end to end, DeBERTa-v3-base takes most of the fast preset's seconds on this CPU, far more than its
FLOPs' share, and bf16 helps it much less than it helps ELECTRA (benchmarks/README.md, matmul_throughput). This
reads one batch of ``--windows`` 512-token windows with a random-weight reader in the real architecture
(``mlpsych.dev.tiny``, loaded as the readers load it: ``AutoModelForQuestionAnswering``), in fp32 and bf16 in
turn, ``--repeat`` times, and prints per dtype the median seconds and the torch profiler's self time of the
operations, grouped: matrix products (``addmm``, ``bmm``, ...), ``gather``, tensor copies (``copy_``: a broadcast
gather index made contiguous, transposed heads, dtype casts), and the rest.
Then the gather alone, at the shape DeBERTa calls it (batch x heads, 512 x 512 from 512 relative positions), with
the index as DeBERTa passes it (a broadcast view of one position matrix) and made contiguous, per dtype. Prints
measurements, not pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.reader_speed import tiny_model  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
MATMULS = {"aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::baddbmm", "aten::linear"}
TOKENS = 512


def group(op: str) -> str:
    """The group an operation's self time counts to."""
    if op in MATMULS:
        return "matrix products"
    if op == "aten::gather":
        return "gather"
    if op == "aten::copy_":  # not gather's alone: every copy of the forward lands here
        return "copies"
    return "other"


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    run()  # warm: the first call allocates
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def forward_breakdown(model: torch.nn.Module, windows: int, repeat: int) -> dict[str, dict[str, float]]:
    """Per dtype: median seconds of a forward over ``windows`` windows and the profiler's self seconds per group."""
    ids = torch.randint(5, min(1000, model.config.vocab_size), (windows, TOKENS))
    mask = torch.ones_like(ids)
    out: dict[str, dict[str, float]] = {}
    for name, dtype in DTYPES.items():
        model.to(dtype)
        with torch.inference_mode():
            seconds = median_seconds(lambda: model(input_ids=ids, attention_mask=mask), repeat)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                model(input_ids=ids, attention_mask=mask)
        groups: dict[str, float] = defaultdict(float)
        for event in prof.key_averages():
            groups[group(event.key)] += event.self_cpu_time_total / 1e6
        out[name] = {"seconds": seconds, **groups}
    return out


def gather_seconds(batch_heads: int, repeat: int) -> dict[str, dict[str, float]]:
    """Per dtype: median seconds of one gather at DeBERTa's shape, its index broadcast and contiguous."""
    index = torch.randint(0, TOKENS, (1, TOKENS, TOKENS)).expand(batch_heads, TOKENS, TOKENS)
    contiguous = index.contiguous()
    out: dict[str, dict[str, float]] = {}
    for name, dtype in DTYPES.items():
        scores = torch.randn(batch_heads, TOKENS, TOKENS).to(dtype)
        out[name] = {"broadcast index": median_seconds(lambda: torch.gather(scores, -1, index), repeat),
                     "contiguous index": median_seconds(lambda: torch.gather(scores, -1, contiguous), repeat)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="base", help="mlpsych.dev.tiny size of DeBERTa-v3 (base, large, tiny)")
    parser.add_argument("--windows", type=int, default=4, help="windows of 512 tokens in the batch")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from transformers import AutoModelForQuestionAnswering

    with tempfile.TemporaryDirectory() as work:
        model = AutoModelForQuestionAnswering.from_pretrained(tiny_model("deberta-v2", args.size, Path(work))).eval()
    print(f"DeBERTa-v3 {args.size} (random weights), {args.windows} windows of {TOKENS} tokens, torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeat}")
    forward = forward_breakdown(model, args.windows, args.repeat)
    print("\n| dtype | s per window | matrix products | gather | copies | other (profiler self time, one forward) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in forward.items():
        total = sum(v for k, v in row.items() if k != "seconds")
        shares = [f"{row.get(g, 0.0):.2f} s ({row.get(g, 0.0) / total:.0%})"
                  for g in ("matrix products", "gather", "copies", "other")]
        print(f"| {name} | {row['seconds'] / args.windows:.3f} | " + " | ".join(shares) + " |")
    print(f"bf16 vs fp32, seconds: {forward['fp32']['seconds'] / forward['bf16']['seconds']:.2f}x faster")
    heads = model.config.num_attention_heads * args.windows
    gathers = gather_seconds(heads, args.repeat * 3)
    print("\n| dtype | gather, index broadcast (as DeBERTa passes it) | gather, index contiguous | ratio |")
    print("|---|---:|---:|---:|")
    for name, row in gathers.items():
        print(f"| {name} | {row['broadcast index'] * 1e3:.1f} ms | {row['contiguous index'] * 1e3:.1f} ms | "
              f"{row['broadcast index'] / row['contiguous index']:.2f}x |")
    layers = model.config.num_hidden_layers
    print(f"({2 * layers} gathers per forward: c2p and p2c in each of {layers} layers; shape [{heads}, {TOKENS}, "
          f"{TOKENS}])")


if __name__ == "__main__":
    main()
