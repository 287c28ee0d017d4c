"""Engines run the pipeline over a corpus: in this process (``local``, the default) or over a Ray cluster (``ray``).

Both take the same inputs and return the same :class:`~mlpsych.pipeline.RunResult`, so the exporter, the app
and the evaluation never know which engine produced a run. An engine is chosen by name with :func:`get_engine`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mlpsych.errors import EngineError

if TYPE_CHECKING:
    from mlpsych.documents import Document
    from mlpsych.pipeline import RunResult, Settled
    from mlpsych.progress import ProgressCallback
    from mlpsych.questions import QuestionSet
    from mlpsych.settings import RunSettings

ENGINES = ("local", "ray")



class Engine(Protocol):
    """Answers every question for every paper; results go to (and come from) the cache in ``cache_dir``;
    ``settled``: what a coder's coding kept by the run settles (``run --keep-coding``): the (paper, question) pairs
    not asked, the follow-ups bridged from a coder's answers in some papers."""

    name: str

    def run(
        self,
        questions: QuestionSet,
        settings: RunSettings,
        documents: list[Document],
        cache_dir: Path | str | None = None,
        progress: bool = True,
        settled: Settled | None = None,
    ) -> RunResult: ...


def get_engine(name: str = "local", *, address: str | None = None, workers: int | None = None,
               on_progress: ProgressCallback | None = None) -> Engine:
    """The engine called ``name``; ``address`` and ``workers`` only mean something to the Ray engine, progress
    events (``on_progress``) only to the local one (Ray's workers report papers done with their own bar)."""
    if name == "local":
        if address or workers:
            raise EngineError("--address and --workers need --engine ray")
        from mlpsych.engines.local import LocalEngine

        return LocalEngine(on_progress)
    if name == "ray":
        from mlpsych.engines.ray_engine import RayEngine

        return RayEngine(address=address, workers=workers)
    raise EngineError(f"unknown engine {name!r} (use {' or '.join(ENGINES)})")


__all__ = ["ENGINES", "Engine", "EngineError", "get_engine"]
