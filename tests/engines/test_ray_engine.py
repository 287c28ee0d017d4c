"""The Ray engine gives the local engine's answers, loads models once per worker, and caches like it."""

from __future__ import annotations

import importlib.util
import json
import socket
import sqlite3

import pytest

from mlpsych.documents import Document
from mlpsych.engines import EngineError, get_engine
from mlpsych.engines.local import LocalEngine
from mlpsych.engines.ray_engine import ChunkReply, RayEngine, RecordingCache, Worker, unanswered, worker_cache_dir
from mlpsych.models import ModelLoadError
from mlpsych.pipeline import RunResult
from mlpsych.questions import load_question_set
from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings

from .conftest import write_questions

HAS_RAY = importlib.util.find_spec("ray") is not None
# The engine refuses to start without Ray: its plans are checked where Ray is installed (mlpsych[scale]).
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install 'mlpsych[scale]'")


def settings(normalize: bool = False) -> RunSettings:
    return RunSettings(reader=ReaderSettings(max_length=192, stride=48, question_tokens=32, batch_size=8),
                       llm=LLMSettings(enabled=normalize, max_new_tokens=12, device="cpu"), max_sub_questions=2)


def answer_set(result: RunResult, final_only: bool = False) -> list[tuple]:
    return sorted((a.doc_id, a.question_id, a.bridge_entity or "", a.stage, a.text, a.start, a.end, a.final,
                   round(a.score, 4)) for a in result.answers if a.final or not final_only)


def rows(cache_dir) -> dict[str, str]:
    with sqlite3.connect(cache_dir / "results.sqlite") as conn:
        return dict(conn.execute("SELECT key, value FROM results"))


# -- no cluster needed ------------------------------------------------------------------------------------


def test_engine_choice_errors() -> None:
    assert get_engine("local").name == "local"
    with pytest.raises(EngineError, match="need --engine ray"):
        get_engine("local", workers=2)
    with pytest.raises(EngineError, match="unknown engine 'spark'"):
        get_engine("spark")
    with pytest.raises(EngineError, match="at least 1" if HAS_RAY else r"needs Ray: pip install 'mlpsych\[scale\]'"):
        get_engine("ray", workers=0)


@pytest.mark.parametrize("address", [None, "", "auto", "local", "ray://127.0.0.1:1", "head", "head:port"])
def test_only_a_host_and_port_are_tried_before_ray_connects(address) -> None:
    """No address (a private instance), Ray's own words and client addresses are left to Ray, which answers at once."""
    assert unanswered(address) is None


def test_worker_shares_the_cache_only_on_the_drivers_host(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MLPSYCH_CACHE", str(tmp_path / "node-default"))
    run = tmp_path / "run"
    run.mkdir()
    (run / ".ray-probe-ab").write_text(socket.gethostname() + "\n")
    (run / ".ray-probe-cd").write_text("another-node\n")  # seen through a shared file system from elsewhere
    assert worker_cache_dir(str(run), ".ray-probe-ab") == (run, True)
    assert worker_cache_dir(str(run), ".ray-probe-cd") == (tmp_path / "node-default", False)
    assert worker_cache_dir(str(run), ".ray-probe-ef") == (tmp_path / "node-default", False)  # not seen at all
    assert worker_cache_dir(str(run), None) == (tmp_path / "node-default", False)


def test_recording_cache_remembers_hits_and_puts(tmp_path) -> None:
    cache = RecordingCache(tmp_path)
    cache.put("k1", {"a": 1}, stage="read")
    assert cache.get("k1") == {"a": 1} and cache.get("missing") is None
    assert cache.take() == [("k1", "read", {"a": 1}), ("k1", "read", {"a": 1})]  # a hit goes home with its stage
    assert cache.take() == []


@pytest.mark.slow
def test_worker_keeps_models_loaded_between_chunks(tiny_models, example_documents, tmp_path, monkeypatch) -> None:
    """The actor's code, run in this process: chunk replies are JSON records, counters are per chunk."""
    monkeypatch.setenv("MLPSYCH_CACHE", str(tmp_path / "node"))
    questions = load_question_set(write_questions(tmp_path, tiny_models))
    worker = Worker(questions.model_dump_json(), settings().model_dump_json(), str(tmp_path / "run"), None)
    first = ChunkReply.from_json(worker.run_chunk(json.dumps([example_documents[0].to_dict()])))
    second = ChunkReply.from_json(worker.run_chunk(json.dumps([example_documents[1].to_dict()])))
    models = {str(tiny_models[f]) for f in ("electra", "roberta", "bert")}
    assert set(first.info.models_loaded) == models and len(first.info.models_loaded) == 3
    assert second.info.models_loaded == []  # kept loaded
    assert second.info.windows_read > 0 and second.info.cache_hits == 0
    assert {a.doc_id for a in second.answers} == {example_documents[1].id}
    # Not sharing the driver's cache: every entry it computed comes back to be stored by the driver.
    keys = {k for k, _, _ in first.cache_entries} | {k for k, _, _ in second.cache_entries}
    assert keys == set(rows(tmp_path / "node"))
    worker.release()


@pytest.mark.slow
def test_a_worker_whose_cache_fills_up_stops_the_run(tiny_models, example_documents, tmp_path) -> None:
    """On a full disk each chunk failed as `worker error: CacheError: ...` and the run wrote a sheet of failed
    papers; the worker now reports it as fatal (as a model that cannot be loaded), which stops the run."""
    questions = load_question_set(write_questions(tmp_path, tiny_models))
    cache_dir = tmp_path / "run"
    cache_dir.mkdir()
    probe = ".ray-probe-test"
    (cache_dir / probe).write_text(socket.gethostname(), encoding="utf-8")  # the worker shares the run's cache
    worker = Worker(questions.model_dump_json(), settings().model_dump_json(), str(cache_dir), probe)
    pages = worker.cache._conn.execute("PRAGMA page_count").fetchone()[0]
    worker.cache._conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite's own "database or disk is full"
    reply = ChunkReply.from_json(worker.run_chunk(json.dumps([example_documents[0].to_dict()])))
    worker.release()
    assert reply.fatal_cache and "database or disk is full" in reply.fatal and reply.failed is None
    assert not reply.answers and not reply.errors  # no paper is given the cache's fault as its status


# -- on a local Ray instance -------------------------------------------------------------------------------


@pytest.mark.slow
def test_ray_run_equals_local_run(ray_cluster, tiny_models, example_documents, tmp_path) -> None:
    questions = load_question_set(write_questions(tmp_path, tiny_models, normalize=True))
    broken = Document(id="broken", text="", status="encrypted PDF: password required")
    docs = [*example_documents, broken]
    local = LocalEngine().run(questions, settings(True), docs, tmp_path / "local", progress=False)
    engine = RayEngine(workers=2)
    distributed = engine.run(questions, settings(True), docs, tmp_path / "ray", progress=False)

    assert answer_set(distributed) == answer_set(local)
    assert len(answer_set(local, final_only=True)) >= 3 * len(example_documents)
    assert distributed.errors == local.errors == {"broken": ["encrypted PDF: password required"]}
    by_row = lambda r: sorted(json.dumps(o, sort_keys=True) for o in r.llm_outputs)  # noqa: E731
    assert by_row(distributed) == by_row(local) and distributed.llm_outputs
    assert [d.id for d in distributed.documents] == [d.id for d in docs]
    # Same work, same keys: the two caches hold the same results.
    assert rows(tmp_path / "ray") == rows(tmp_path / "local")
    assert distributed.info.windows_read == local.info.windows_read
    assert distributed.info.engine == "ray" and distributed.info.workers == 2
    # Two workers, each loaded each reader once for all its papers (locally BERT is loaded again for q4,
    # because the local engine releases every model when its stage ends).
    assert len(engine.pids_seen) == 2
    readers = [str(tiny_models[f]) for f in ("electra", "roberta", "bert")]
    assert sorted(distributed.info.models_loaded) == sorted(2 * readers)
    assert sorted(local.info.models_loaded) == sorted([*readers, str(tiny_models["bert"])])
    assert not list((tmp_path / "ray").glob(".ray-probe-*"))  # the probe is cleaned up


FACTS_OF_THE_RUN_ITSELF = ("engine", "workers", "started", "seconds")


@needs_ray
@pytest.mark.slow
def test_a_run_given_no_paper_starts_no_worker_and_tells_the_runs_facts(tiny_models, tmp_path) -> None:
    """Every paper coded (`run --keep-coding`): the engine gets no paper. The Ray engine started Ray and its workers
    for nothing, and its run sheet was blank (no versions, models, settings, nor the demo models' note): the facts
    came only with the workers' chunks. Now both engines tell the same facts, counts 0, and no worker starts."""
    questions = load_question_set(write_questions(tmp_path, tiny_models))
    local = LocalEngine().run(questions, settings(), [], tmp_path / "cache", progress=False)
    engine = RayEngine(workers=1)
    distributed = engine.run(questions, settings(), [], tmp_path / "cache", progress=False)
    assert engine.worker_pids == [] and not engine.pids_seen
    assert distributed.info.engine == "ray" and distributed.info.workers == 0
    assert local.answers == distributed.answers == [] and local.errors == distributed.errors == {}
    facts = {k: v for k, v in distributed.info.to_dict().items() if k not in FACTS_OF_THE_RUN_ITSELF}
    assert facts == {k: v for k, v in local.info.to_dict().items() if k not in FACTS_OF_THE_RUN_ITSELF}
    assert facts["mlpsych"] and facts["torch"] and facts["settings"] and facts["calibrator"]
    assert set(facts["models"]) == {str(tiny_models[f]) for f in ("electra", "roberta", "bert")}
    assert facts["demo_models"] == facts["models"]  # the sheet's note that these are demo answers
    assert facts["windows_read"] == facts["cache_hits"] == facts["cache_misses"] == 0 and not facts["models_loaded"]
    # A GPU the workers have and this machine does not: nothing read here, so no dtype to tell, and no error.
    on_gpu = settings().model_copy(update={"reader": settings().reader.model_copy(update={"device": "cuda"})})
    assert RayEngine(workers=1).run(questions, on_gpu, [], tmp_path / "cache", progress=False).info.mlpsych


@pytest.mark.slow
def test_a_run_whose_every_chunk_failed_still_tells_the_runs_facts(ray_cluster, tiny_models, example_documents,
                                                                   tmp_path, monkeypatch) -> None:
    """Every chunk failed (its workers died past their retries): each paper gets the failure as its status, and the
    run sheet its facts, told here; they came only with the chunks answered, so it was blank (no versions, models,
    settings, nor the demo models' note)."""
    questions = load_question_set(write_questions(tmp_path, tiny_models))
    docs = example_documents[:2]
    monkeypatch.setattr(RayEngine, "_dispatch", lambda self, ray, actors, chunks, cache, progress, bridges: {
        index: ChunkReply(failed="worker died: killed by the test") for index in range(len(chunks))})
    result = RayEngine(workers=1).run(questions, settings(), docs, tmp_path / "cache", progress=False)
    assert result.answers == [] and set(result.errors) == {d.id for d in docs}
    assert all(problems == ["worker died: killed by the test"] for problems in result.errors.values())
    facts = result.info.to_dict()
    assert facts["mlpsych"] and facts["torch"] and facts["settings"] and facts["calibrator"]
    assert facts["demo_models"] == facts["models"] and set(facts["models"]) == {
        str(tiny_models[f]) for f in ("electra", "roberta", "bert")}
    assert facts["engine"] == "ray" and facts["workers"] == 1 and facts["windows_read"] == 0


@pytest.mark.slow
def test_results_come_home_when_workers_cannot_see_the_cache(ray_cluster, tiny_models, example_documents,
                                                             tmp_path) -> None:
    """Workers on other nodes cache locally; the driver stores what they return, so a rerun here is instant."""
    questions = load_question_set(write_questions(tmp_path, tiny_models))
    docs = example_documents[:2]
    RayEngine(workers=1, shared_cache=False).run(questions, settings(), docs, tmp_path / "driver", progress=False)
    assert len(rows(tmp_path / "driver")) >= 2 * 3  # per paper at least: q1 by two models, q2, a q4 sub-question
    again = LocalEngine().run(questions, settings(), docs, tmp_path / "driver", progress=False)
    assert again.info.windows_read == 0 and again.info.cache_misses == 0 and again.info.models_loaded == []


@pytest.mark.slow
def test_unknown_model_on_a_worker_stops_the_run_with_its_message(ray_cluster, tiny_models, example_documents,
                                                                  tmp_path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text("questions:\n  - id: q1\n    text: What methods were used?\n"
                    "    models: [nobody/no-such-model-squad2]\n", encoding="utf-8")
    with pytest.raises(ModelLoadError, match="nobody/no-such-model-squad2"):
        RayEngine(workers=1).run(load_question_set(path), settings(), example_documents[:1], tmp_path / "c",
                                 progress=False)


class FakeCluster:
    """What ``ray.cluster_resources()`` and ``ray.nodes()`` report for a cluster of nodes (CPUs, GPUs)."""

    def __init__(self, *nodes: tuple[int, int]) -> None:
        self._nodes = [{"Alive": True, "Resources": {"CPU": c, **({"GPU": g} if g else {})}} for c, g in nodes]

    def cluster_resources(self) -> dict:
        return {"CPU": sum(c for c, _ in self.shape), "GPU": sum(g for _, g in self.shape)}

    @property
    def shape(self) -> list[tuple[int, int]]:
        return [(n["Resources"]["CPU"], n["Resources"].get("GPU", 0)) for n in self._nodes]

    def nodes(self) -> list[dict]:
        return self._nodes


@needs_ray
@pytest.mark.parametrize(("nodes", "workers", "device", "expected"), [
    ([(8, 0), (8, 0)], None, "auto", (2, {"num_cpus": 8})),  # one CPU worker per node, all its CPUs
    ([(8, 0), (8, 0)], 1, "auto", (1, {"num_cpus": 8})),  # never more CPUs than one node has
    ([(2, 0)], 2, "auto", (2, {"num_cpus": 1})),  # this machine in the benchmark
    ([(16, 4), (16, 4)], None, "auto", (8, {"num_gpus": 1, "num_cpus": 1})),  # one worker per GPU
    ([(16, 4)], 2, "cuda:1", (2, {"num_gpus": 1, "num_cpus": 1})),
    ([(16, 4)], 2, "cpu", (2, {"num_cpus": 8})),  # --device cpu: CPU workers even with GPUs
])
def test_worker_plan(nodes, workers, device, expected) -> None:
    run = RunSettings(reader=ReaderSettings(device=device))
    assert RayEngine(workers=workers)._plan(FakeCluster(*nodes), run) == expected


@needs_ray
def test_more_gpu_workers_than_gpus_is_refused() -> None:
    with pytest.raises(EngineError, match="more GPU workers than the cluster's 4 GPUs"):
        RayEngine(workers=5)._plan(FakeCluster((16, 4)), RunSettings())


def test_gpu_workers_read_a_pinned_device_as_their_own() -> None:
    run = RunSettings(reader=ReaderSettings(device="cuda:3"), llm=LLMSettings(device="cuda:2"))
    mine = RayEngine._worker_settings(run, gpu=True)
    assert mine.reader.device == "cuda" and mine.llm.device == "cuda"
    assert RayEngine._worker_settings(run, gpu=False) is run
