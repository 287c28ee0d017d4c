"""The normalize stage: each answer list through the LLM for the questions that ask for it, several papers'
prompts at a time; without a usable LLM the extractive answers stay."""

from __future__ import annotations

import logging
from dataclasses import replace

from tqdm.auto import tqdm

from mlpsych.answers import Answer, AnswerStage
from mlpsych.errors import CacheError, NormalizerUnavailable
from mlpsych.normalize import answers as llm_answers
from mlpsych.normalize.answers import NormalizeAudit, choose_model
from mlpsych.normalize.llm import ListNormalizer
from mlpsych.pipeline.context import StageContext
from mlpsych.pipeline.records import Level, LevelSize, Unit, UnitAnswers
from mlpsych.pipeline.result import RunResult, isolated
from mlpsych.progress import ProgressEvent
from mlpsych.questions import QuestionTemplate
from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)

NORMALIZE_CHUNK = 16  # answer lists whose prompts are generated together


def answer_stages(settings: RunSettings) -> tuple[AnswerStage, ...]:
    """The LLM's items that are answers: grounded ones, and ungrounded ones too where the run keeps them."""
    if settings.llm.keep_ungrounded:
        return (AnswerStage.NORMALIZED, AnswerStage.UNGROUNDED)
    return (AnswerStage.NORMALIZED,)


class NormalizeStage:
    """LLM normalization, one LLM at a time (loaded once, only if some output is not cached); each chunk of
    ``NORMALIZE_CHUNK`` answer lists is cached as soon as it is generated."""

    name = "normalize"

    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings

    def _by_llm(self, questions: list[QuestionTemplate]) -> dict[str, list[QuestionTemplate]]:
        by_llm: dict[str, list[QuestionTemplate]] = {}
        if self.settings.llm.enabled:
            for q in questions:
                if q.normalize:
                    by_llm.setdefault(choose_model(q, self.settings.llm.model), []).append(q)
        return by_llm

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        events = []
        for llm, questions in self._by_llm(size.questions).items():
            ids = tuple(q.id for q in questions)
            events.append(size.event("normalize", ids, llm, -(-size.answer_lists(ids) // NORMALIZE_CHUNK), "batch"))
        return events

    def run(self, level: Level, ctx: StageContext) -> None:
        by_llm: dict[str, list[UnitAnswers]] = {}
        for item in level.answered:
            if item.unit.question.normalize and self.settings.llm.enabled:
                by_llm.setdefault(choose_model(item.unit.question, self.settings.llm.model), []).append(item)
        for llm, items in by_llm.items():
            self._normalize(llm, items, ctx)

    def _normalize(self, llm: str, items: list[UnitAnswers], ctx: StageContext) -> None:
        step = ProgressEvent("normalize", tuple(dict.fromkeys(i.unit.question.id for i in items)), llm, 0,
                             -(-len(items) // NORMALIZE_CHUNK), "batch")
        ctx.report(step)
        with ctx.models.normalizer(llm, self.settings, ctx.cache) as normalizer:
            bar = tqdm(total=len(items), desc=f"normalize · {llm.rstrip('/').split('/')[-1]}", unit="answer list",
                       disable=not ctx.progress)
            try:
                for batch, chunk_start in enumerate(range(0, len(items), NORMALIZE_CHUNK), start=1):
                    chunk = items[chunk_start : chunk_start + NORMALIZE_CHUNK]
                    self._chunk(normalizer, llm, chunk, ctx.result, ctx.progress)
                    bar.update(len(chunk))
                    ctx.report(replace(step, done=batch))
            except NormalizerUnavailable as error:
                log.warning("normalization skipped, extractive answers kept: %s", error)
                ctx.result.info.warnings.append(f"normalization skipped: {error}")
            finally:
                bar.close()
                ctx.counters.llm_generated += normalizer.generated

    def _chunk(self, normalizer: ListNormalizer, llm: str, chunk: list[UnitAnswers], result: RunResult,
               progress: bool) -> None:
        """One chunk of answer lists through the LLM; a paper whose prompts, generation or answers fail keeps its
        extractive answers and gets the failure as its status, the others are normalized."""
        prompts: dict[int, dict[str, str]] = {}
        for i, item in enumerate(chunk):
            with isolated(result, item.unit.doc.id, f"normalizing {item.unit.question.id}"):
                prompts[i] = llm_answers.prompts_for(item.unit.question, item.per_model,
                                         max_input_items=self.settings.llm.max_input_items,
                                         input_format=self.settings.llm.input_format)
        outputs = generate(normalizer, chunk, prompts, result, progress)
        for i, results in outputs.items():
            item = chunk[i]
            with isolated(result, item.unit.doc.id, f"normalizing {item.unit.question.id}"):
                normalized, audit = llm_answers.combine_results(item.unit.doc, item.unit.question, item.per_model,
                                                                results, llm=llm, prompts=prompts[i])
                adopt(item.unit, normalized, audit, item.rows, result, answer_stages(self.settings))
                result.answers.extend(normalized)


def generate(normalizer: ListNormalizer, chunk: list[UnitAnswers], prompts: dict[int, dict[str, str]],
             result: RunResult, progress: bool) -> dict[int, dict]:
    """LLM results per chunk index and model, generated together; if that fails, each answer list alone, so the
    failure is the status of the paper that caused it."""
    def generate_for(indices: list[int]) -> dict[int, dict]:
        flat = [(i, model, text) for i in indices for model, text in prompts[i].items()]
        outputs = normalizer.run([text for _, _, text in flat], progress=progress)
        found: dict[int, dict] = {i: {} for i in indices}
        for (i, model, _), output in zip(flat, outputs):
            found[i][model] = output
        return found

    if len(prompts) > 1:
        try:
            return generate_for(list(prompts))
        except (NormalizerUnavailable, CacheError):
            raise
        except Exception as error:  # noqa: BLE001 - retried one answer list at a time below
            log.debug("generating a chunk of %d answer lists failed (%s); one at a time", len(prompts), error)
    found: dict[int, dict] = {}
    for i in prompts:  # a paper whose generation fails keeps its extractive answers
        with isolated(result, chunk[i].unit.doc.id, f"normalizing {chunk[i].unit.question.id}"):
            found.update(generate_for([i]))
    return found


def adopt(unit: Unit, normalized: list[Answer], audit: NormalizeAudit, extractive: list[Answer], result: RunResult,
          stages: tuple[AnswerStage, ...]) -> None:
    """Mark one answer list's normalized rows final (and its extractive rows not) when they are the answer (their
    stage is among ``stages``); record the LLM's raw outputs and errors."""
    for model, text in audit.raw_outputs.items():
        result.llm_outputs.append({"paper_id": unit.doc.id, "question_id": unit.question.id,
                                   "llm": audit.llm, "model": model, "raw_output": text})
    for model, error in audit.errors.items():
        result.errors.setdefault(unit.doc.id, []).append(f"normalize {unit.question.id} ({model}): {error}")
    grounded = [a for a in normalized if a.stage in stages]
    # An empty list is an answer for questions that may have none, unless the LLM's output failed or held no list.
    if grounded or (unit.question.allow_empty and not audit.errors and audit.readable):
        for a in extractive:
            a.final = False
    for a in normalized:
        a.final = a.stage in stages
        a.bridge_entity = unit.query.bridge_entity
