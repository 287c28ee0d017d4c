"""benchmarks/onnx_runtime.py: a reader exported to ONNX reads as torch does (fp32 to rounding), and every
configuration is timed and compared."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.benchmarks.scripts import load_script

onnx_runtime = load_script("onnx_runtime")


@pytest.mark.parametrize("family", ["deberta-v2", "electra"])
def test_onnx_runtime_reads_a_tiny_reader_as_torch_does(family: str, tmp_path: Path) -> None:
    ids = torch.randint(5, 100, (2, 48))
    runs = onnx_runtime.configurations(onnx_runtime.tiny_model(family, "tiny", tmp_path), ids, tmp_path)
    assert list(runs) == ["torch fp32", "torch bf16", "torch int8", "ort fp32", "ort int8"]
    rows = onnx_runtime.measure(runs, repeat=1)
    assert rows["torch fp32"]["difference"] == 0.0
    assert rows["ort fp32"]["difference"] < 1e-4  # the same model, another runtime
    assert all(row["seconds"] > 0 for row in rows.values())
    assert runs["ort int8"]().shape == (2, 48)
