"""Papers over a Ray cluster: long-lived workers that each hold the models, fed with chunks of papers.

Each worker is a Ray actor holding a :class:`~mlpsych.pipeline.Pipeline` with ``keep_loaded=True``, so its
models are loaded once and reused for every chunk it reads; there is one actor per GPU when the cluster has
GPUs (``num_gpus=1`` each), else CPU actors. A chunk carries whole papers, so multi-hop questions (which need
the paper's bridge answers) run where the paper is. Papers and results cross the wire as JSON text.

Caching: workers on the driver's machine use the run's cache folder (the driver drops a probe file naming its
host there; a worker that finds it, written by its own host, shares the cache). Workers on other nodes never
write that SQLite file, even when a shared file system shows it to them: SQLite's WAL mode needs every writer
on one machine, and a network file system can corrupt it. They cache in their node's default cache folder
and send home every entry they computed or found there; the driver stores them in its own cache under the
same keys, so a rerun on the driver is served from the cache.

Faults: an actor that dies (killed, out of memory, node lost) is restarted by Ray and its tasks are retried
(``max_restarts`` / ``max_task_retries``); a chunk whose worker is gone for good is sent to another worker.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import secrets
import socket
import time
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mlpsych.answers import Answer
from mlpsych.cache import CHECKPOINT_STAGE, ResultCache, default_cache_dir
from mlpsych.documents import Document
from mlpsych.engines import EngineError
from mlpsych.errors import CacheError
from mlpsych.models import ModelLoadError
from mlpsych.pipeline import RunInfo, RunResult, Settled
from mlpsych.pipeline.core import reader_gflops
from mlpsych.questions import QuestionSet
from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)

PROBE_PREFIX = ".ray-probe-"
START_TIMEOUT_S = 300  # starting a worker process and importing torch; models load later, per chunk


@dataclass
class ChunkReply:
    """What a worker sends back for a chunk of papers (as JSON): its results, or why there are none."""

    pid: int = 0
    shared_cache: bool = False
    answers: list[Answer] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    llm_outputs: list[dict] = field(default_factory=list)
    info: RunInfo = field(default_factory=RunInfo)  # this chunk's share of the counts
    cache_entries: list[list] = field(default_factory=list)  # (key, stage, value) for the driver's cache
    fatal: str | None = None  # a model could not be loaded, or the cache used: the run stops, as it does locally
    fatal_cache: bool = False  # the fatal problem is the cache's (a CacheError), not a model's
    failed: str | None = None  # the chunk's worker died or hit a bug: its papers get this status

    def to_json(self) -> str:
        data = asdict(self)
        data["answers"] = [a.to_dict() for a in self.answers]
        data["info"] = asdict(self.info)
        return json.dumps(data, ensure_ascii=False, default=str)

    @classmethod
    def from_json(cls, text: str) -> ChunkReply:
        data = json.loads(text)
        data["answers"] = [Answer.from_dict(a) for a in data["answers"]]
        data["info"] = RunInfo.from_dict(data["info"])
        return cls(**data)


class RecordingCache(ResultCache):
    """A result cache that remembers what it stored, and what it served, since the last ``take``.

    A worker that cannot see the driver's cache sends all of it home: results it computed and results it
    found in its own node-local cache (so the driver's cache ends up complete either way).
    """

    def __init__(self, directory: Path | str | None = None) -> None:
        super().__init__(directory)
        self._used: list[tuple[str, str, Any]] = []

    def get(self, key: str, counted: bool = True) -> Any | None:
        found = self.entry(key, counted)
        if found is not None and counted:
            self._used.append((key, found.stage, found.value))  # stored at home under its stage
        return None if found is None else found.value

    def put(self, key: str, value: Any, stage: str = "") -> None:
        """Stored, and sent home unless a read's checkpoint (megabytes for a thesis, of use only to a rerun reading
        on this node: it stays in this node's cache)."""
        super().put(key, value, stage)
        if stage != CHECKPOINT_STAGE:
            self._used.append((key, stage, value))

    def take(self) -> list[tuple[str, str, Any]]:
        used, self._used = self._used, []
        return used


def worker_cache_dir(cache_dir: str, probe: str | None) -> tuple[Path, bool]:
    """The run's cache folder when this worker finds the driver's probe file there, written on this host;
    else the node's default cache folder. ``probe`` None means "do not share" (node-local caches asked for)."""
    if probe:
        try:
            if (Path(cache_dir) / probe).read_text(encoding="utf-8").strip() == socket.gethostname():
                return Path(cache_dir), True
        except OSError:
            pass
    return default_cache_dir(), False


class Worker:
    """What runs inside a Ray actor: one pipeline, models kept loaded, one chunk of papers per call."""

    def __init__(self, questions_json: str, settings_json: str, cache_dir: str, probe: str | None,
                 threads: int = 0) -> None:
        from mlpsych.pipeline import Pipeline

        if threads:
            import torch

            torch.set_num_threads(threads)
        directory, self.shared = worker_cache_dir(cache_dir, probe)
        self.cache = RecordingCache(directory)
        questions = QuestionSet.model_validate_json(questions_json)
        settings = RunSettings.model_validate_json(settings_json)
        self.pipeline = Pipeline(questions, settings, self.cache, progress=False, keep_loaded=True)

    def pid(self) -> int:
        return os.getpid()

    def run_chunk(self, documents_json: str, settled_json: str | None = None) -> str:
        """Answer every question for these papers (but what a kept coding settles, as ``settled_json`` says: pairs
        not asked, follow-ups bridged from the coding); the reply (JSON) holds answers, problems and counts."""
        documents = [Document.from_dict(d) for d in json.loads(documents_json)]
        settled = Settled.from_json(settled_json) if settled_json else None
        before, loads_before = self._counters(), len(self.pipeline.model_loads)
        tokens_before = dict(self.pipeline.tokens_read)
        self.cache.take()
        reply = ChunkReply(pid=os.getpid(), shared_cache=self.shared)
        try:
            result = self.pipeline.run(documents, settled)
        except (ModelLoadError, CacheError) as error:  # stops the run, as locally; finished work is in the cache
            return replace(reply, fatal=str(error), fatal_cache=isinstance(error, CacheError),
                           cache_entries=self._entries()).to_json()
        tokens = {m: t - tokens_before.get(m, 0) for m, t in self.pipeline.tokens_read.items()}
        info = replace(result.info, **{k: v - before[k] for k, v in self._counters().items()},
                       models_loaded=self.pipeline.model_loads[loads_before:], tokens_read=tokens)
        return replace(reply, answers=result.answers, errors=result.errors, llm_outputs=result.llm_outputs,
                       info=info, cache_entries=self._entries()).to_json()

    def _counters(self) -> dict[str, int]:
        """The pipeline's counters grow over the worker's life: a chunk reports their growth."""
        return {"cache_hits": self.cache.hits, "cache_misses": self.cache.misses,
                "windows_read": self.pipeline.windows_read,
                "llm_prompts_generated": self.pipeline.llm_generated}

    def _entries(self) -> list:
        written = self.cache.take()
        return [] if self.shared else [list(entry) for entry in written]

    def release(self) -> None:
        self.pipeline.release()


ADDRESS_PROBE_S = 10  # a head that does not answer a TCP connection in this time is not there


def unanswered(address: str | None) -> str | None:
    """Why nothing answers at a cluster address ``HOST:PORT`` (refused, unknown host, no reply), or None when it
    answers or is not such an address (``auto``, ``ray://...``: Ray says itself, at once). Ray waited for such a
    head without end, printing a warning every few seconds, after every paper was read."""
    address = address or ""
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=ADDRESS_PROBE_S).close()
    except socket.gaierror:
        return f"unknown host {host}"
    except TimeoutError:
        return f"no reply in {ADDRESS_PROBE_S} s"
    except OSError as error:
        return error.strerror or str(error)
    return None


def _import_ray():
    try:
        import ray
    except ImportError:
        raise EngineError("the ray engine needs Ray: pip install 'mlpsych[scale]'") from None
    return ray


class RayEngine:
    """Distributes papers over a Ray cluster and gathers one :class:`RunResult`, as the local engine returns.

    ``address``: None starts a private Ray instance here (or joins ``$RAY_ADDRESS``), ``auto`` joins the
    cluster this machine belongs to, ``ray://head:10001`` connects as a Ray client. When Ray is already
    initialized in this process (a notebook, a test), that connection is used and left open.
    ``workers``: actors to start (default: one per GPU, else one per node). ``cpus_per_worker``: CPUs (and
    torch threads) of each CPU worker (default: the cluster's CPUs split evenly, at most one node's).
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        *,
        chunk_size: int = 1,
        in_flight: int = 2,
        max_restarts: int = 3,
        max_task_retries: int = 3,
        resubmits: int = 2,
        shared_cache: bool | None = None,
        cpus_per_worker: int | None = None,
        init_options: dict | None = None,
    ) -> None:
        if importlib.util.find_spec("ray") is None:
            raise EngineError("the ray engine needs Ray: pip install 'mlpsych[scale]'")
        if workers is not None and workers < 1:
            raise EngineError(f"--workers must be at least 1 (got {workers})")
        if chunk_size < 1 or in_flight < 1:
            raise EngineError("chunk_size and in_flight must be at least 1")
        target = address or os.environ.get("RAY_ADDRESS")
        if address not in ("auto", "local") and (reason := unanswered(target)):  # before any paper is read
            raise EngineError(f"cannot connect to Ray at {target}: nothing answers there ({reason}); start the "
                              "cluster with `ray start --head` on its head machine, or give the address it printed "
                              "(HEAD_IP:6379)")
        self.address = address
        self.workers = workers
        self.chunk_size = chunk_size
        self.in_flight = in_flight
        self.max_restarts = max_restarts
        self.max_task_retries = max_task_retries
        self.resubmits = resubmits
        self.shared_cache = shared_cache  # None: each worker checks; False: node-local caches, sent home
        self.cpus_per_worker = cpus_per_worker  # CPU workers: torch threads each (default: the CPUs split evenly)
        self.init_options = dict(init_options or {})
        self.worker_pids: list[int] = []  # at start; tests kill one of them
        self.pids_seen: set[int] = set()  # every worker process that returned a chunk (restarts show up here)

    # -- cluster ---------------------------------------------------------------------------------------
    def _connect(self, ray) -> bool:
        """Join or start Ray; True when this call started the connection (and so must close it)."""
        if ray.is_initialized():
            return False
        starts_here = not self.address and not os.environ.get("RAY_ADDRESS")
        # A private instance needs no dashboard; an existing cluster (or a Ray client) keeps its own settings.
        options = {**({"include_dashboard": False} if starts_here else {}), **self.init_options}
        try:  # "local": a private instance, even when `ray start` left a cluster address on this machine
            ray.init(address="local" if starts_here else self.address, **options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            where = self.address or os.environ.get("RAY_ADDRESS") or "a new local instance"
            raise EngineError(f"cannot connect to Ray at {where}: {first}") from None
        return True

    def _plan(self, ray, settings: RunSettings) -> tuple[int, dict]:
        """How many actors, and the resources each asks for: one GPU each, or a share of the CPUs."""
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        cpus = max(1, int(resources.get("CPU", 1)))
        wants_gpu = settings.reader.device == "auto" or settings.reader.device.startswith("cuda")
        if gpus and wants_gpu:
            n = self.workers or gpus
            if n > gpus:
                raise EngineError(f"--workers {n} asks for more GPU workers than the cluster's {gpus} GPUs")
            return n, {"num_gpus": 1, "num_cpus": 1}
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        n = self.workers or max(1, len(nodes))
        # A worker must fit on one node: never ask for more CPUs than the largest node has.
        largest = max((int(node.get("Resources", {}).get("CPU", 0)) for node in nodes), default=cpus) or 1
        return n, {"num_cpus": self.cpus_per_worker or max(1, min(cpus // n, largest))}

    @staticmethod
    def _worker_settings(settings: RunSettings, gpu: bool) -> RunSettings:
        """A GPU actor sees only its own GPU, as cuda:0: pinned devices ('cuda:3') are read as 'cuda'."""
        if not gpu:
            return settings
        reader = settings.reader
        if reader.device.startswith("cuda:"):
            reader = reader.model_copy(update={"device": "cuda"})
        llm = settings.llm
        if llm.device.startswith("cuda:"):
            llm = llm.model_copy(update={"device": "cuda"})
        return settings.model_copy(update={"reader": reader, "llm": llm})

    def _start_workers(self, ray, questions: QuestionSet, settings: RunSettings, cache_dir: Path,
                       probe: str | None):
        n, resources = self._plan(ray, settings)
        settings = self._worker_settings(settings, "num_gpus" in resources)
        actor_class = ray.remote(Worker).options(
            max_restarts=self.max_restarts, max_task_retries=self.max_task_retries,
            scheduling_strategy="SPREAD", **resources,
        )
        threads = 0 if "num_gpus" in resources else resources["num_cpus"]
        actors = [actor_class.remote(questions.model_dump_json(), settings.model_dump_json(), str(cache_dir), probe,
                                     threads) for _ in range(n)]
        from ray.exceptions import GetTimeoutError

        try:
            self.worker_pids = ray.get([a.pid.remote() for a in actors], timeout=START_TIMEOUT_S)
        except GetTimeoutError:
            for actor in actors:
                ray.kill(actor)
            raise EngineError(f"{n} Ray worker(s) asking for {resources} could not start within {START_TIMEOUT_S} s; "
                              "check `ray status` for free resources, or ask for fewer --workers") from None
        log.info("ray: %d worker(s) started (%s each)", n, ", ".join(f"{k}={v}" for k, v in resources.items()))
        return actors

    # -- the run ---------------------------------------------------------------------------------------
    def run(
        self,
        questions: QuestionSet,
        settings: RunSettings,
        documents: list[Document],
        cache_dir: Path | str | None = None,
        progress: bool = True,
        settled: Settled | None = None,
    ) -> RunResult:
        ray = _import_ray()
        if not documents:  # every paper coded (run --keep-coding): no cluster to join, no worker to start
            return self._read_nothing(questions, settings, cache_dir)
        started = time.time()
        opened = self._connect(ray)
        cache = ResultCache(cache_dir)
        probe = cache.directory / f"{PROBE_PREFIX}{secrets.token_hex(8)}"
        actors: list = []
        try:
            probe.write_text(f"{socket.gethostname()}\n", encoding="utf-8")
            actors = self._start_workers(ray, questions, settings, cache.directory,
                                         None if self.shared_cache is False else probe.name)
            chunks = [documents[i : i + self.chunk_size] for i in range(0, len(documents), self.chunk_size)]
            replies = self._dispatch(ray, actors, chunks, cache, progress, settled or Settled())
            result = self._gather(questions, documents, chunks, replies)
            if all(reply.failed is not None for reply in replies.values()):  # the facts come with answered chunks
                result.info = replace(self._facts_here(questions, settings, cache_dir), warnings=result.info.warnings)
        finally:
            for actor in actors:
                ray.kill(actor)
            probe.unlink(missing_ok=True)
            cache.close()
            if opened:
                ray.shutdown()
        result.info = replace(result.info, seconds=round(time.time() - started, 2), cache=str(cache.path),
                              engine=self.name, workers=len(actors),
                              started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)))
        return result

    def _read_nothing(self, questions: QuestionSet, settings: RunSettings,
                      cache_dir: Path | str | None) -> RunResult:
        """A run given no paper: its facts told here (:meth:`_facts_here`), no worker started (Ray and its workers
        were started for nothing)."""
        return RunResult(documents=[], questions=questions,
                         info=replace(self._facts_here(questions, settings, cache_dir), engine=self.name, workers=0))

    @staticmethod
    def _facts_here(questions: QuestionSet, settings: RunSettings, cache_dir: Path | str | None) -> RunInfo:
        """The run's facts (versions, models, settings, the demo models' note) as the local engine tells them, counts
        all 0, for a run no worker answered: given no paper, or every chunk failed. The workers tell these facts
        with their chunks' answers, so with none the run sheet had them blank (no note that answers kept from a
        coded sheet came from demo models)."""
        from mlpsych.engines.local import LocalEngine

        return LocalEngine().run(questions, settings, [], cache_dir, progress=False).info

    def _dispatch(self, ray, actors: list, chunks: list[list[Document]], cache: ResultCache, progress: bool,
                  settled: Settled) -> dict[int, ChunkReply]:
        """Send chunks to the least busy live worker, a few in flight each (with what the kept coding settles of
        their papers); collect replies by chunk index."""
        from ray.exceptions import RayActorError, RayTaskError

        payloads = [json.dumps([d.to_dict() for d in chunk], ensure_ascii=False, default=str) for chunk in chunks]
        coded = [settled.only(d.id for d in chunk).to_json() for chunk in chunks]
        queue = deque(range(len(chunks)))
        load = [0] * len(actors)
        alive = [True] * len(actors)
        tries = [0] * len(chunks)
        pending: dict[Any, tuple[int, int]] = {}
        replies: dict[int, ChunkReply] = {}
        bar = tqdm(total=sum(len(c) for c in chunks), desc="papers (ray)", unit="paper", disable=not progress)
        try:
            while queue or pending:
                while queue and any(alive[a] and load[a] < self.in_flight for a in range(len(actors))):
                    a = min((a for a in range(len(actors)) if alive[a]), key=lambda a: load[a])
                    index = queue.popleft()
                    pending[actors[a].run_chunk.remote(payloads[index], coded[index])] = (index, a)
                    load[a] += 1
                if not pending:
                    raise EngineError("every Ray worker died; finished work is kept in the cache, rerun to resume")
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                index, a = pending.pop(ref)
                load[a] -= 1
                try:
                    reply = ChunkReply.from_json(ray.get(ref))
                except RayActorError as error:  # restarts used up: this worker is gone for good
                    alive[a] = False
                    tries[index] += 1
                    log.warning("ray worker %d died for good (%s)", a, str(error).splitlines()[0][:200])
                    if tries[index] <= self.resubmits:
                        queue.append(index)
                    else:
                        replies[index] = ChunkReply(failed=f"worker died: {str(error).splitlines()[0][:200]}")
                    continue
                except RayTaskError as error:  # a bug, not a model or paper problem: keep the other chunks
                    log.error("ray chunk %d failed: %s", index, error)
                    replies[index] = ChunkReply(
                        failed=f"worker error: {str(error.cause or error).splitlines()[0][:200]}")
                    bar.update(len(chunks[index]))
                    continue
                self._store(cache, reply.cache_entries)
                reply.cache_entries = []
                self.pids_seen.add(reply.pid)
                if reply.fatal:
                    for other in pending:
                        ray.cancel(other, force=False)
                    raise (CacheError if reply.fatal_cache else ModelLoadError)(reply.fatal)
                replies[index] = reply
                bar.update(len(chunks[index]))
        finally:
            bar.close()
        return replies

    @staticmethod
    def _store(cache: ResultCache, entries: list) -> None:
        """What a worker used from or put in its node-local cache, stored here under the same keys, so a
        rerun on this machine is served from the cache. Keys already here are left alone."""
        for key, stage, value in entries:
            if cache.get(key) is None:
                cache.put(key, value, stage=stage)

    @staticmethod
    def _gather(questions: QuestionSet, documents: list[Document], chunks: list[list[Document]],
                replies: dict[int, ChunkReply]) -> RunResult:
        """One RunResult from the chunks' replies, in paper order, with the run counts summed."""
        result = RunResult(documents=documents, questions=questions)
        infos: list[RunInfo] = []
        for index, chunk in enumerate(chunks):
            reply = replies.get(index, ChunkReply(failed="no reply"))
            if reply.failed is not None:
                for doc in chunk:
                    result.errors.setdefault(doc.id, []).append(reply.failed)
                continue
            result.answers.extend(reply.answers)
            for doc_id, problems in reply.errors.items():
                result.errors.setdefault(doc_id, []).extend(problems)
            result.llm_outputs.extend(reply.llm_outputs)
            infos.append(reply.info)
        result.info = RunInfo.gathered(infos)
        result.info.reader_gflops = reader_gflops(result.info.tokens_read)
        return result
