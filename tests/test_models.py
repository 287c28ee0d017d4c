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

    cpuinfo = tmp_path / "cpuinfo"
    monkeypatch.setattr(models, "CPUINFO", cpuinfo)
    cpuinfo.write_text(FLAGS.format(extra=""), encoding="utf-8")
    assert pick_dtype("auto", "cpu") is torch.float32
    cpuinfo.write_text(FLAGS.format(extra="amx_bf16"), encoding="utf-8")
    assert pick_dtype("auto", "cpu") is torch.bfloat16
    assert pick_dtype("fp32", "cpu") is torch.float32  # asked for: kept
    with pytest.raises(ModelLoadError, match="fp16 is not supported"):
        pick_dtype("fp16", "cpu")
