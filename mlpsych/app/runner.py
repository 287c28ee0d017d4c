"""One run from the page: check the models, read the papers, answer; every outcome is a record, never a raise.

The model check comes first (seconds), so a machine without the models learns it before any paper is read; the
pipeline's plan is handed to the page once the papers are read, so its estimate knows every stage up front.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mlpsych.errors import UserError, bug_report, one_line
from mlpsych.preflight import ModelCheck, check_models, missing_message, run_models
from mlpsych.progress import ProgressCallback, ProgressEvent

if TYPE_CHECKING:
    from mlpsych.documents import Document
    from mlpsych.pipeline import RunResult
    from mlpsych.questions import QuestionSet
    from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    """What a run in the app produced: a result (possibly with per-paper errors) or one message for the page."""

    result: RunResult | None = None
    error: str | None = None
    documents: list[Document] = field(default_factory=list)
    seconds: float = 0.0
    checks: list[ModelCheck] = field(default_factory=list)

    @property
    def missing_models(self) -> bool:
        return any(c.where == "missing" for c in self.checks)

    @property
    def nothing_read(self) -> bool:
        """Papers were given but none has text to answer from: a run with nothing to show or download."""
        return self.result is not None and not any(d.readable for d in self.documents)


def run_papers(
    papers: list[Path] | Path,
    questions: QuestionSet,
    settings: RunSettings,
    *,
    cache_dir: Path | str | None = None,
    on_progress: ProgressCallback | None = None,
    on_start: Callable[[list[Document], list[ProgressEvent]], None] | None = None,
    pdf_backend: str = "auto",
) -> RunOutcome:
    """Check the models, read the papers and answer the questions with the CLI's cache.

    A missing model stops the run before any paper is read (``outcome.error``, ``outcome.checks``); one
    unreadable paper becomes a status on its row; a model that fails to load, or an unexpected failure, becomes
    ``outcome.error`` (finished work stays in the cache).
    """
    from mlpsych.cache import ResultCache
    from mlpsych.ingest import load_documents
    from mlpsych.models import ModelLoadError
    from mlpsych.pipeline import Pipeline

    started = time.monotonic()
    outcome = RunOutcome()
    cache = None
    try:
        cache = ResultCache(cache_dir)
        pipeline = Pipeline(questions, settings, cache, progress=False, on_progress=on_progress)
        outcome.checks = check_models(run_models(pipeline.plan(1)))
        outcome.error = missing_message(outcome.checks)
        if outcome.error is None:
            outcome.documents = load_documents(papers, pdf_backend=pdf_backend, progress=False)
            if on_start:
                on_start(outcome.documents, pipeline.plan(sum(d.readable for d in outcome.documents)))
            outcome.result = pipeline.run(outcome.documents)
    except UserError as error:
        outcome.error = str(error).splitlines()[0] if str(error) else type(error).__name__
    except ModelLoadError as error:
        outcome.error = f"{error} (finished work is kept in the cache)"
    except Exception as error:  # noqa: BLE001 - the page must stay alive and say what happened
        log.exception("run failed")
        outcome.error = (f"the run stopped: {one_line(error)}. "
                         f"{bug_report('the papers and settings you used', 'the terminal running the page shows it')}")
    finally:
        if cache is not None:
            cache.close()
    outcome.seconds = time.monotonic() - started
    return outcome
