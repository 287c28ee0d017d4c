"""What every stage of a run shares: settings, the cache, the run's result, its counters, the loaded models and
the list of stages; and what a stage is (:class:`Stage`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mlpsych.cache import ResultCache
from mlpsych.pipeline.records import Level, LevelSize, Settled
from mlpsych.pipeline.result import RunResult
from mlpsych.progress import ProgressCallback, ProgressEvent
from mlpsych.settings import RunSettings

if TYPE_CHECKING:
    from mlpsych.normalize.cache import CachedNormalizer
    from mlpsych.reading.reader import Reader
    from mlpsych.retrieval import WindowSelector


class Stage(Protocol):
    """One step of every level: ``plan`` the progress stages it reports (with a model to wait for), ``run`` it
    over the level's papers, reading and adding to the level's records."""

    name: str

    def plan(self, size: LevelSize) -> list[ProgressEvent]: ...

    def run(self, level: Level, ctx: StageContext) -> None: ...


@dataclass
class RunCounters:
    """What a pipeline did over its life (a long-lived worker reports their growth per chunk)."""

    windows_read: int = 0
    tokens_read: dict[str, int] = field(default_factory=dict)  # model -> input tokens read (not cached): its FLOPs
    model_loads: list[str] = field(default_factory=list)
    llm_generated: int = 0  # prompts sent to an LLM (cached outputs are not)


class ModelPool:
    """The run's models, loaded once per stage and released when it ends, so encoders and the LLM are never
    resident together; with ``keep_loaded`` (a long-lived worker) they stay loaded between runs instead."""

    def __init__(self, keep_loaded: bool = False) -> None:
        self.keep_loaded = keep_loaded
        self.readers: dict[str, Reader] = {}
        self.normalizers: dict[str, CachedNormalizer] = {}
        self._selector: WindowSelector | None = None

    @contextmanager
    def reader(self, model: str, settings: RunSettings, cache_dir: Path | None = None) -> Iterator[Reader]:
        """A reader for one stage (not loaded until it reads); its model freed after, unless kept. The reader
        itself stays until :meth:`end_run`: a later stage reuses its tokenizer and the papers it tokenized (each
        stage tokenized them again before)."""
        from mlpsych.reading.reader import Reader

        reader = self.readers.get(model) or Reader(model, settings.reader, cache_dir)
        try:
            yield reader
        finally:
            self.readers[model] = reader
            if not self.keep_loaded:
                reader.unload()

    @contextmanager
    def normalizer(self, llm: str, settings: RunSettings, cache: ResultCache) -> Iterator[CachedNormalizer]:
        """The LLM behind the cache for one stage (loaded only if some output is not cached); released after."""
        from mlpsych.normalize.cache import CachedNormalizer

        normalizer = self.normalizers.get(llm) or CachedNormalizer(llm, settings.llm, cache)
        yield normalizer
        if self.keep_loaded:
            self.normalizers[llm] = normalizer
        else:
            normalizer.release()

    def selector(self, settings: RunSettings) -> WindowSelector:
        """Retrieval's scorers, made when a question first retrieves and kept (they hold no reader)."""
        if self._selector is None:
            from mlpsych.retrieval import WindowSelector

            self._selector = WindowSelector(settings.retrieval)
        return self._selector

    def end_run(self) -> None:
        """After a run: everything released, unless models are kept loaded between runs."""
        if not self.keep_loaded:
            self.release()

    def release(self) -> None:
        """Every reader and LLM dropped, then one full collection: cyclic garbage of earlier work (a notebook's
        failed run) may hold a model, and must not be resident when the next run loads its own. One collection
        for the pool, not one per reader (0.3 s each with a run's records in memory)."""
        from mlpsych.models import free_memory

        for reader in self.readers.values():
            reader.release()
        for normalizer in self.normalizers.values():
            normalizer.release()
        self.readers.clear()
        self.normalizers.clear()
        free_memory()


@dataclass
class StageContext:
    """One run as the stages see it: where results, problems and progress go, and the shared resources."""

    settings: RunSettings
    cache: ResultCache
    result: RunResult
    counters: RunCounters
    models: ModelPool
    stages: list[Stage]  # what the run walks for every level
    progress: bool = True  # tqdm bars
    on_progress: ProgressCallback | None = None
    levels: list[Level] = field(default_factory=list)  # the run's levels so far: a follow-up finds its bridge's units
    settled: Settled = field(default_factory=Settled)  # what a kept coding settles (run --keep-coding)

    def report(self, event: ProgressEvent) -> None:
        if self.on_progress:
            self.on_progress(event)
