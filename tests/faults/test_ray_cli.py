"""`mlpsych run --engine ray` writes the file the local engine writes, through the same exporter."""

from __future__ import annotations

import pytest

from mlpsych.cli import main

from .conftest import cli_args


@pytest.mark.slow
def test_cli_with_ray_engine_writes_the_local_output(ray_cluster, papers, fast_questions, reference, tmp_path,
                                                     capsys) -> None:
    out = tmp_path / "out.jsonl"
    args = cli_args(papers, fast_questions, out, tmp_path / "cache")
    assert main([*args, "--engine", "ray", "--workers", "2"]) == 0
    assert out.read_text(encoding="utf-8") == reference["jsonl"].read_text(encoding="utf-8")
    assert "4 papers" in capsys.readouterr().out


def test_workers_without_ray_engine_is_one_line(papers, tmp_path, capsys) -> None:
    assert main(["run", str(papers), "--out", str(tmp_path / "r.xlsx"), "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["mlpsych: error: --address and --workers need --engine ray"]
