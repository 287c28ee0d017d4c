"""benchmarks/onnx_runtime.py: a reader exported to ONNX reads as torch does (fp32 to rounding), and every
configuration is timed and compared."""

from __future__ import annotations

import shutil
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


def test_only_the_configurations_asked_for_are_loaded(tmp_path: Path) -> None:
    # Large readers in emulated bf16 take minutes a forward on a CPU without bf16: --configs leaves them out.
    ids = torch.randint(5, 100, (1, 32))
    path = onnx_runtime.tiny_model("electra", "tiny", tmp_path)
    runs = onnx_runtime.configurations(path, ids, tmp_path, ("ort fp32",))
    assert list(runs) == ["torch fp32", "ort fp32"]
    assert onnx_runtime.measure(runs, repeat=1)["ort fp32"]["difference"] < 1e-4


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="torch.compile's CPU code needs a C++ compiler")
def test_a_compiled_reader_is_timed_only_when_asked_and_reads_as_eager(tmp_path: Path) -> None:
    ids = torch.randint(5, 100, (1, 32))
    path = onnx_runtime.tiny_model("electra", "tiny", tmp_path)
    assert "torch compiled" not in onnx_runtime.configurations(path, ids, tmp_path)
    rows = onnx_runtime.measure(onnx_runtime.configurations(path, ids, tmp_path, ("torch compiled",)), repeat=1)
    assert list(rows) == ["torch fp32", "torch compiled"]
    assert rows["torch compiled"]["difference"] < 1e-4  # the same arithmetic, fused
    assert rows["torch compiled"]["first"] > rows["torch compiled"]["seconds"]  # the first call compiles
