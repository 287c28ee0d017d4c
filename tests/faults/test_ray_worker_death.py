"""A Ray worker killed in the middle of a chunk: Ray restarts it, the chunk is retried, the output is complete."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from mlpsych.engines.local import LocalEngine
from mlpsych.engines.ray_engine import RayEngine
from mlpsych.ingest import load_documents
from mlpsych.questions import load_question_set

from .conftest import cache_rows, run_settings


def finals(result) -> list[tuple]:
    return sorted((a.doc_id, a.question_id, a.bridge_entity or "", a.text, round(a.score, 4))
                  for a in result.answers if a.final)



def kill_first_worker_when_busy(engine: RayEngine, cache: Path) -> tuple[list[int], threading.Thread]:
    """SIGKILL the engine's first worker once it has written results; returns the killed pids and the thread."""
    killed: list[int] = []

    def kill() -> None:
        deadline = time.time() + 240
        while not (engine.worker_pids and cache_rows(cache)) and time.time() < deadline:
            time.sleep(0.05)
        if engine.worker_pids:
            os.kill(engine.worker_pids[0], signal.SIGKILL)
            killed.append(engine.worker_pids[0])

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    return killed, killer

@pytest.mark.slow
def test_killed_worker_is_restarted_and_its_chunk_retried(ray_cluster, papers, fast_questions, reference,
                                                          tmp_path) -> None:
    docs = load_documents(papers, progress=False)
    questions = load_question_set(fast_questions)
    expected = LocalEngine().run(questions, run_settings(), docs, reference["cache"], progress=False)
    assert expected.info.cache_misses == 0  # the reference run's answers, served from its cache

    engine = RayEngine(workers=1, chunk_size=1)
    cache = tmp_path / "cache"
    killed, killer = kill_first_worker_when_busy(engine, cache)
    result = engine.run(questions, run_settings(), docs, cache, progress=False)
    killer.join(timeout=10)

    assert killed, "the worker was never killed"
    assert engine.pids_seen - set(killed), "no restarted worker returned a chunk"
    assert result.errors == {}
    assert finals(result) == finals(expected)
    assert set(cache_rows(cache)) == reference["keys"]


@pytest.mark.slow
def test_dead_worker_chunk_goes_to_another_worker(ray_cluster, papers, fast_questions, reference, tmp_path) -> None:
    """Without restarts a killed worker is gone for good: the driver sends its chunks to the other worker."""
    docs = load_documents(papers, progress=False)
    questions = load_question_set(fast_questions)
    expected = LocalEngine().run(questions, run_settings(), docs, reference["cache"], progress=False)
    engine = RayEngine(workers=2, chunk_size=1, max_restarts=0, max_task_retries=0)
    cache = tmp_path / "cache"
    killed, killer = kill_first_worker_when_busy(engine, cache)
    result = engine.run(questions, run_settings(), docs, cache, progress=False)
    killer.join(timeout=10)

    assert killed and engine.worker_pids[1] in engine.pids_seen
    assert result.errors == {}
    assert finals(result) == finals(expected)
