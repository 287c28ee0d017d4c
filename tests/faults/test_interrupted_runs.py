"""SIGKILL in the middle of a run, and two runs sharing one cache: nothing finished is lost or redone."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest
from openpyxl import load_workbook

from mlpsych.cli import main

from .conftest import cache_rows, cli_args, integrity, start_cli

SHEETS = ("papers", "answers", "model_answers", "llm")


def sheets(path: Path) -> dict[str, list[tuple]]:
    workbook = load_workbook(path)
    return {name: list(workbook[name].iter_rows(values_only=True)) for name in SHEETS}


def run_sheet(path: Path) -> dict[str, str]:
    return dict(load_workbook(path)["run"].iter_rows(min_row=2, values_only=True))


@pytest.mark.slow
def test_sigkill_then_rerun_recomputes_nothing_that_finished(papers, fast_questions, reference, tmp_path) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out.xlsx"
    process = start_cli(*cli_args(papers, fast_questions, out, cache))
    deadline = time.time() + 240
    while not cache_rows(cache):
        assert process.poll() is None, f"the run ended before it could be killed: {process.communicate()[1][-2000:]}"
        assert time.time() < deadline, "no result was cached in time"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL

    finished = cache_rows(cache)
    assert integrity(cache) == "ok"
    assert 0 < len(finished) < len(reference["keys"])  # killed in the middle
    assert not out.exists()  # no half-written spreadsheet

    assert main(cli_args(papers, fast_questions, out, cache)) == 0
    after = cache_rows(cache)
    assert set(after) == reference["keys"]
    assert {k: after[k] for k in finished} == finished  # nothing that finished was computed (stored) again
    facts = run_sheet(out)
    assert int(facts["cache_misses"]) == len(after) - len(finished)  # only the missing units were computed
    assert int(facts["cache_hits"]) >= len(finished)
    assert sheets(out) == sheets(reference["xlsx"])


@pytest.mark.slow
def test_two_runs_sharing_a_cache_at_once(papers, fast_questions, reference, tmp_path) -> None:
    subset = tmp_path / "papers"
    subset.mkdir()
    chosen = sorted(papers.glob("*.txt"))[:2]
    for path in chosen:
        shutil.copy(path, subset / path.name)
    cache = tmp_path / "shared-cache"
    outs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    processes = [start_cli(*cli_args(subset, fast_questions, out, cache)) for out in outs]
    for process in processes:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-2000:]
    assert integrity(cache) == "ok"
    keys = set(cache_rows(cache))
    assert keys and keys < reference["keys"]  # each result stored once, under the keys a single run uses
    ids = {path.stem for path in chosen}
    expected = [line for line in reference["jsonl"].read_text(encoding="utf-8").splitlines()
                if json.loads(line)["paper_id"] in ids]
    for out in outs:
        assert out.read_text(encoding="utf-8").splitlines() == expected
