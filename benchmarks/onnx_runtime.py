"""torch against ONNX Runtime for each reader architecture of the fast preset, on this CPU (issue 26, item 2).

    python benchmarks/onnx_runtime.py [--readers deberta-v2:base electra:base bert:minilm-l12] [--windows 4]

Why: DeBERTa-v3-base reads at 27% of the bf16 matmul rate here, against 54-66% for ELECTRA-base with the same
FLOPs (benchmarks/deberta_attention.py, matmul_throughput.py): its relative-position attention is many small
operations, which a graph runtime may do better than eager torch. The issue names ONNX Runtime as the
alternative "if it measures better". This measures it per forward pass; the readers read with it under
``runtime: onnxruntime`` (``mlpsych.onnx_runtime``), whose end-to-end figures are reader_vs_reference's.

Each reader is a random-weight model in its real architecture (``mlpsych.dev.tiny``), loaded as the readers load
it (``AutoModelForQuestionAnswering``). ONNX Runtime reads it as the readers' runtime does: exported to ONNX
(torch's TorchScript exporter, batch and length dynamic) and, for int8, ONNX Runtime's dynamic quantization of the
encoder (weights int8, activations quantized at run time: what ``dtype: int8`` does in torch). One batch of
``--windows`` 512-token windows is read by torch in fp32, bf16 and int8 (``mlpsych.models.quantize_linear_layers``)
and by ONNX Runtime in fp32 and int8, in turn ``--repeat`` times; the median seconds per window are printed, with
each configuration's largest start-logit difference from torch fp32 (fp32 in ONNX Runtime should agree to rounding;
int8 is an approximation whose answers are judged as `dtype_answers.py` judges torch's). ``--configs`` may also
name "torch compiled": torch fp32 through ``torch.compile`` (inductor; needs a C++ compiler), whose first call,
the compilation, is printed apart. Prints measurements, not pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.reader_speed import tiny_model  # noqa: E402
from mlpsych.models import ModelLoadError, quantize_linear_layers  # noqa: E402
from mlpsych.onnx_runtime import import_onnxruntime, load_onnx_qa_model  # noqa: E402

TOKENS = 512
READERS = ("deberta-v2:base", "electra:base", "bert:minilm-l12")  # the fast preset's architectures


CONFIGS = ("torch fp32", "torch bf16", "torch int8", "ort fp32", "ort int8")
OPTIONAL = ("torch compiled",)  # timed only when named: compiling takes tens of seconds a reader and a compiler


def selected(names: tuple[str, ...]) -> list[str]:
    """The configurations timed for ``names``, in table order: torch fp32 always, the reference of the differences."""
    return [name for name in CONFIGS + OPTIONAL if name == "torch fp32" or name in names]


def configurations(path: str, ids: torch.Tensor, work: Path,
                   names: tuple[str, ...] = CONFIGS) -> dict[str, Callable[[], np.ndarray]]:
    """Each way of reading ``ids`` that ``selected(names)`` gives: a call returning the start logits as float32
    (ONNX Runtime's exports kept in ``work``)."""
    from transformers import AutoModelForQuestionAnswering as AutoQA

    mask = torch.ones_like(ids)

    def torch_reader(model: torch.nn.Module) -> Callable[[], np.ndarray]:
        def read() -> np.ndarray:
            with torch.inference_mode():
                return model(input_ids=ids, attention_mask=mask).start_logits.float().numpy()
        return read

    def torch_int8() -> torch.nn.Module:
        model = AutoQA.from_pretrained(path).eval()
        quantize_linear_layers(model)
        return model

    loaders: dict[str, Callable[[], object]] = {
        "torch fp32": lambda: AutoQA.from_pretrained(path).eval(),
        "torch bf16": lambda: AutoQA.from_pretrained(path, dtype=torch.bfloat16).eval(),
        "torch int8": torch_int8,
        "torch compiled": lambda: torch.compile(AutoQA.from_pretrained(path).eval()),
        # exported as mlpsych's readers export
        "ort fp32": lambda: load_onnx_qa_model(path, "float32", with_types=False, cache_dir=work),
        "ort int8": lambda: load_onnx_qa_model(path, "qint8", with_types=False, cache_dir=work),
    }
    return {name: torch_reader(loaders[name]()) for name in selected(names)}


def measure(runs: dict[str, Callable[[], np.ndarray]], repeat: int) -> dict[str, dict[str, float]]:
    """Per configuration: the median seconds of a call (interleaved), the seconds of its first call (warm-up, and
    compilation where there is one) and its largest difference from torch fp32."""
    reference = runs["torch fp32"]()
    differences, first = {}, {}
    for name, run in runs.items():
        started = time.perf_counter()
        differences[name] = float(np.abs(run() - reference).max())
        first[name] = time.perf_counter() - started
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - started)
    return {name: {"seconds": statistics.median(seconds[name]), "first": first[name], "difference": differences[name]}
            for name in runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readers", nargs="+", default=list(READERS), help="FAMILY:SIZE of mlpsych.dev.tiny")
    parser.add_argument("--windows", type=int, default=4, help="windows of 512 tokens in the batch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--configs", type=lambda v: tuple(x.strip() for x in v.split(",")), default=CONFIGS,
                        help=f"comma-separated, of: {', '.join(CONFIGS + OPTIONAL)} (torch fp32 always; default: "
                             f"{', '.join(CONFIGS)})")
    args = parser.parse_args()
    unknown = set(args.configs) - set(CONFIGS + OPTIONAL)
    if unknown:
        parser.error(f"--configs: unknown {', '.join(sorted(unknown))} (choose from: {', '.join(CONFIGS + OPTIONAL)})")
    shown = selected(args.configs)
    try:
        onnxruntime = import_onnxruntime()
    except ModelLoadError as error:
        raise SystemExit(str(error)) from None
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), onnxruntime {onnxruntime.__version__}; "
          f"{args.windows} windows of {TOKENS} tokens, median of {args.repeat} interleaved; random weights")
    print(f"\n| reader | {' | '.join(shown)} | largest start-logit difference from torch fp32 "
          f"({' / '.join(shown[1:])}) |")
    print("|---|" + "---:|" * len(shown) + "---|")
    compiled: list[str] = []
    for reader in args.readers:
        family, size = reader.split(":")
        with tempfile.TemporaryDirectory() as work:
            ids = torch.randint(5, 1000, (args.windows, TOKENS))
            rows = measure(configurations(tiny_model(family, size, Path(work)), ids, Path(work), args.configs),
                           args.repeat)
        per_window = [f"{rows[n]['seconds'] / args.windows:.3f} s" for n in rows]
        differences = " / ".join(f"{rows[n]['difference']:.1e}" for n in list(rows)[1:])
        print(f"| {reader} | " + " | ".join(per_window) + f" | {differences} |", flush=True)
        if "torch compiled" in rows:
            compiled.append(f"{reader} {rows['torch compiled']['first']:.1f} s")
    if compiled:
        print(f"\nThe compiled readers' first call (compiling): {', '.join(compiled)}")


if __name__ == "__main__":
    main()
