"""The default engine: the pipeline in this process, one model loaded at a time."""

from __future__ import annotations

from pathlib import Path

from mlpsych.cache import ResultCache
from mlpsych.documents import Document
from mlpsych.pipeline import Pipeline, RunResult, Settled
from mlpsych.progress import ProgressCallback
from mlpsych.questions import QuestionSet
from mlpsych.settings import RunSettings


class LocalEngine:
    """Runs :class:`~mlpsych.pipeline.Pipeline` here; ``on_progress`` is passed through (the app uses it)."""

    name = "local"

    def __init__(self, on_progress: ProgressCallback | None = None) -> None:
        self.on_progress = on_progress

    def run(
        self,
        questions: QuestionSet,
        settings: RunSettings,
        documents: list[Document],
        cache_dir: Path | str | None = None,
        progress: bool = True,
        settled: Settled | None = None,
    ) -> RunResult:
        cache = ResultCache(cache_dir)
        try:
            pipeline = Pipeline(questions, settings, cache, progress=progress, on_progress=self.on_progress)
            result = pipeline.run(documents, settled)
        finally:
            cache.close()
        result.info.engine = self.name
        return result
