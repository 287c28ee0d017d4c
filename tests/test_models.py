"""Device and dtype choice: half precision only where the hardware runs it natively."""

from __future__ import annotations

import pytest
import torch

from mlpsych.models import ModelLoadError, cpu_runs_bf16_natively, pick_dtype

FLAGS = "processor\t: 0\nflags\t\t: fpu vme sse sse2 avx2 avx512f avx512bw {extra}\n"


@pytest.mark.parametrize(("extra", "native"), [("", False), ("avx512_bf16", True), ("amx_tile amx_bf16", True),
                                               ("avx512_bf16x", False)])
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path, extra, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(FLAGS.format(extra=extra), encoding="utf-8")
    assert cpu_runs_bf16_natively(cpuinfo) is native
    assert cpu_runs_bf16_natively(tmp_path / "absent") is False  # not Linux: no cpuinfo, no claim


def test_auto_dtype_on_a_cpu_follows_its_bf16_support(tmp_path, monkeypatch):
    import mlpsych.models as models

    monkeypatch.delenv(models.DTYPE_ENV, raising=False)
    plain, native = tmp_path / "plain", tmp_path / "native"
    plain.write_text(FLAGS.format(extra=""), encoding="utf-8")
    native.write_text(FLAGS.format(extra="amx_bf16"), encoding="utf-8")
    monkeypatch.setattr(models, "CPUINFO", plain)
    assert pick_dtype("auto", "cpu") is torch.float32
    monkeypatch.setattr(models, "CPUINFO", native)
    assert pick_dtype("auto", "cpu") is torch.bfloat16
    assert pick_dtype("fp32", "cpu") is torch.float32  # asked for: kept
    with pytest.raises(ModelLoadError, match="fp16 is not supported"):
        pick_dtype("fp16", "cpu")


def test_the_environment_decides_what_auto_means(monkeypatch):
    from mlpsych.models import DTYPE_ENV, dtype_name

    monkeypatch.setenv(DTYPE_ENV, "bf16")
    assert pick_dtype("auto", "cpu") is torch.bfloat16 and dtype_name("auto", "cpu") == "bfloat16"
    assert pick_dtype("fp32", "cpu") is torch.float32  # an explicit choice wins
    monkeypatch.setenv(DTYPE_ENV, "fp32")
    assert pick_dtype("auto", "cpu") is torch.float32 and dtype_name("auto", "cpu") == "float32"
    monkeypatch.setenv(DTYPE_ENV, "fp8")
    with pytest.raises(ModelLoadError, match=r"'fp8' \(from \$MLPSYCH_DTYPE\)"):
        pick_dtype("auto", "cpu")
