"""`mlpsych run --engine ray` writes the file the local engine writes, through the same exporter."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import time

import pytest

from mlpsych.cli import main

from .conftest import cli_args, start_cli


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


def free_port() -> int:
    """A port nothing listens on (one the system just handed out and took back)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed: pip install 'mlpsych[scale]'")
def test_an_address_where_no_cluster_answers_is_one_line_before_any_paper_is_read(papers, fast_questions,
                                                                                    tmp_path) -> None:
    """`--address HOST:PORT` with no cluster there (not started, a wrong port) read every paper, then waited for the
    head without end, printing a GCS warning every few seconds."""
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    process = start_cli(*cli_args(papers, fast_questions, tmp_path / "out.xlsx", tmp_path / "cache"),
                        "--engine", "ray", "--address", address)
    try:
        _, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"still waiting for a Ray head at {address} after 120 s")
    assert process.returncode == 2
    assert err.strip().splitlines()[-1] == (
        f"mlpsych: error: cannot connect to Ray at {address}: nothing answers there (Connection refused); start the "
        "cluster with `ray start --head` on its head machine, or give the address it printed (HEAD_IP:6379)")
    assert "read 4 document(s)" not in err and not (tmp_path / "cache").exists()  # said before any paper is read
    assert time.monotonic() - started < 60
