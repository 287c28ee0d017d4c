"""The pipeline: a list of stages that ``run()`` walks over the papers, level by level, and ``plan()`` walks to
say what a run will do, so the plan cannot drift from what runs.

Questions run in levels: those without a bridge first, then those whose bridge question has finished. Within a
level each stage runs over every paper (follow-up -> sizing -> select -> read -> merge -> normalize ->
confidence); each model is loaded once and released before the next model or the LLM is loaded. Every unit of
work is cached as soon as it finishes, so a rerun resumes.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Sequence
from dataclasses import replace

from mlpsych.cache import ResultCache, model_fingerprint
from mlpsych.documents import Document
from mlpsych.errors import ModelLoadError
from mlpsych.models import dtype_name, is_random_weights
from mlpsych.pipeline.confidence import ConfidenceStage
from mlpsych.pipeline.context import ModelPool, RunCounters, Stage, StageContext
from mlpsych.pipeline.follow_up import FollowUpStage
from mlpsych.pipeline.merge import MergeStage
from mlpsych.pipeline.normalize import NormalizeStage
from mlpsych.pipeline.read import ReadStage, SelectStage
from mlpsych.pipeline.records import Level, LevelSize, Settled, is_follow_up
from mlpsych.pipeline.result import RunInfo, RunResult, isolated
from mlpsych.progress import ProgressCallback, ProgressEvent
from mlpsych.provenance import version
from mlpsych.questions import QuestionSet, QuestionTemplate
from mlpsych.reading.cost import flops
from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)


class SizingStage:
    """Once a follow-up level's units exist (after the follow-up stage), every stage the run walks is reported with
    its size (``sizing``), so a front end estimates the rest of the run from counted work instead of a guess."""

    name = "sizing"

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        return []  # no model: it reports the other stages' plans

    def run(self, level: Level, ctx: StageContext) -> None:
        if not ctx.on_progress or not is_follow_up(level.questions):
            return
        size = LevelSize.counted(level)
        for stage in ctx.stages:
            for event in stage.plan(size):
                ctx.report(replace(event, sizing=True))


def reader_gflops(tokens_read: dict[str, int]) -> dict[str, float | None]:
    """GFLOPs of each model's reading for the run sheet; None where its architecture cannot be told (a Hub model
    whose config is not on this machine, all its reads cached): the run's results never wait on it."""
    gflops: dict[str, float | None] = {}
    for model, tokens in tokens_read.items():
        try:
            gflops[model] = round(flops(model, tokens) / 1e9, 1)
        except Exception as error:  # noqa: BLE001 - a figure for the run sheet, not worth failing a run for
            log.debug("no FLOPs for %s: %s", model, error)
            gflops[model] = None
    return gflops


def question_levels(questions: QuestionSet) -> list[list[QuestionTemplate]]:
    """Questions grouped so every bridge question sits in an earlier level than those that use it."""
    depth: dict[str, int] = {}
    for q in questions.in_run_order():
        depth[q.id] = depth[q.bridge_from] + 1 if q.bridge_from else 0
    levels: list[list[QuestionTemplate]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for q in questions.in_run_order():
        levels[depth[q.id]].append(q)
    return levels


class Pipeline:
    """Configure with questions, settings and a cache; ``run(documents)`` answers every question for every paper."""

    def __init__(
        self,
        questions: QuestionSet,
        settings: RunSettings | None = None,
        cache: ResultCache | None = None,
        progress: bool = True,
        on_progress: ProgressCallback | None = None,
        keep_loaded: bool = False,
    ) -> None:
        self.questions = questions
        self.settings = settings or RunSettings()
        self.cache = cache if cache is not None else ResultCache()
        self.progress = progress
        self.on_progress = on_progress
        self.counters = RunCounters()
        # Models stay loaded between runs only when asked (a long-lived worker); otherwise each model is released
        # as soon as its stage ends, so encoders and the LLM are never resident together.
        self.models = ModelPool(keep_loaded)

    def stages(self) -> list[Stage]:
        """The stages of every level, in order: the one place a stage is added."""
        return [FollowUpStage(self.settings), SizingStage(), SelectStage(self.settings), ReadStage(self.settings),
                MergeStage(self.settings), NormalizeStage(self.settings),
                ConfidenceStage(self.settings, self.questions)]

    # What the pipeline did over its life (a long-lived worker reports their growth per chunk).
    @property
    def windows_read(self) -> int:
        return self.counters.windows_read

    @property
    def tokens_read(self) -> dict[str, int]:
        return self.counters.tokens_read

    @property
    def model_loads(self) -> list[str]:
        return self.counters.model_loads

    @property
    def llm_generated(self) -> int:
        return self.counters.llm_generated

    def plan(self, papers: int | Sequence[str], settled: Settled | None = None) -> list[ProgressEvent]:
        """The stages a run over ``papers`` (readable ones: their ids, or how many) reports, in order, with their
        units to do (done 0); ``settled``: the (paper, question) pairs a kept coding settles, not counted (the run
        does not ask them).

        A front end sizes its estimate from this before the first event, and learns every model of the run (the
        LLM included) without knowing the defaults. A follow-up level's sub-questions exist only once the level
        before it is answered: its entries are not ``counted`` until the run reports them (``SizingStage``).
        """
        ids = [str(i) for i in range(papers)] if isinstance(papers, int) else list(papers)
        settled = settled or Settled()
        stages = self.stages()
        return [event for level in question_levels(self.questions) for stage in stages
                for event in stage.plan(LevelSize.planned(level, settled.asked(ids, [q.id for q in level])))]

    def run(self, documents: list[Document], settled: Settled | None = None) -> RunResult:
        """Every question for every paper; ``settled``: what a coder's coding kept by the run settles (``run
        --keep-coding``): the (paper, question) pairs not asked, the follow-ups whose entities come from the coding
        of their bridge question in some papers, not from this run's answers to it."""
        started = time.time()
        result = RunResult(documents=documents, questions=self.questions)
        stages = self.stages()
        ctx = StageContext(self.settings, self.cache, result, self.counters, self.models, stages, self.progress,
                           self.on_progress, settled=settled or Settled())
        docs = []
        for doc in documents:
            if not doc.ok:
                result.errors.setdefault(doc.id, []).append(doc.status)
                continue
            with isolated(result, doc.id, "hashing"):
                if doc.text.strip() and doc.sha256:  # a text that cannot be hashed cannot be cached: it fails alone
                    docs.append(doc)
        try:
            for questions in question_levels(self.questions):
                level = Level(questions, docs, first_row=len(result.answers))
                ctx.levels.append(level)
                for stage in stages:
                    stage.run(level, ctx)
        finally:
            self.models.end_run()
        result.info = self._info(started, during=result.info)
        return result

    def release(self) -> None:
        """Free every model kept loaded with ``keep_loaded``."""
        self.models.release()

    def _adapted(self) -> list[str]:
        """The run sheet's line per reader written by ``mlpsych adapt``: what it was adapted on, for which questions
        it answered here."""
        from mlpsych.coding.adapt import describe_adapted

        lines = []
        for model in sorted({m for q in self.questions.questions for m in q.models}):
            described = describe_adapted(model)
            if described:
                asked = [q.id for q in self.questions.questions if model in q.models]
                lines.append(f"{model}: answered {', '.join(asked)}; {described}")
        return lines

    def _run_models(self) -> dict[str, list[str]]:
        """Every model of the run (readers, the cascade's small reader, the LLM: what its plan loads) -> the stages
        that use it, in the order the run loads them."""
        models: dict[str, list[str]] = {}
        for event in self.plan(1):
            models.setdefault(event.model, []).append(event.stage)
        return models

    def _reader_dtype(self) -> str:
        """What the readers' ``auto`` dtype is here; blank where their device is not on this machine, which only a
        run that read nothing here reaches (a Ray run given no paper, its workers' GPU not the driver's)."""
        try:
            return self.settings.reader.cache_fields()["dtype"]
        except ModelLoadError:
            return ""

    def _llm_dtype(self, models: dict[str, list[str]]) -> str | None:
        """What the LLM's ``auto`` dtype was here, when the run normalizes (None without an LLM, or where it could
        not run as asked: the run then kept its extractive answers, and its warnings say why)."""
        if not any("normalize" in stages for stages in models.values()):
            return None
        try:
            return dtype_name(self.settings.llm.dtype, self.settings.llm.device)
        except ModelLoadError:
            return None

    def _info(self, started: float, during: RunInfo) -> RunInfo:
        """The run's facts; ``during``: what the stages noted while running (warnings, the calibrator)."""
        import tokenizers
        import torch
        import transformers

        counters = self.counters
        models = self._run_models()
        return RunInfo(
            mlpsych=version(),
            python=platform.python_version(),
            torch=torch.__version__,
            transformers=transformers.__version__,
            tokenizers=tokenizers.__version__,
            platform=platform.platform(),
            questions=self.questions.source,
            models=sorted({m for q in self.questions.questions for m in q.models}),
            adapted_readers=self._adapted(),
            # random-weight models (the demo's): their answers are meaningless, and the front ends and sheets say so
            demo_models=sorted(m for m in models if is_random_weights(m)),
            settings=self.settings.describe(),
            # "auto" differs between machines (bf16 where the CPU has it): what the readers ran in, to reproduce
            reader_dtype=self._reader_dtype(),
            llm_dtype=self._llm_dtype(models),
            # which files or Hub commit each model was: an id alone does not say (a Hub model is updated in place)
            model_revisions={m: model_fingerprint(m) for m in models},
            started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
            seconds=round(time.time() - started, 2),
            cache=str(self.cache.path),
            cache_hits=self.cache.hits,
            cache_misses=self.cache.misses,
            windows_read=counters.windows_read,
            tokens_read=dict(counters.tokens_read),
            reader_gflops=reader_gflops(counters.tokens_read),
            models_loaded=list(counters.model_loads),
            llm_prompts_generated=counters.llm_generated,
            warnings=list(during.warnings),
            capped=during.capped,
            calibrator=during.calibrator,
            coded_entities=during.coded_entities,
        )
