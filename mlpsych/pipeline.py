"""Runs the stages over a corpus: read -> merge/ensemble -> normalize -> multi-hop, with caching and progress.

Questions run in levels: those without a bridge first, then those whose bridge question has finished. Within a
level each model is loaded once, reads every paper for all its questions, and is released before the next
model or the LLM is loaded. Every unit of work is cached as soon as it finishes, so a rerun resumes.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import accumulate

from tqdm.auto import tqdm

from mlpsych import __version__
from mlpsych.answers import Answer, Span
from mlpsych.cache import ResultCache, make_key, model_fingerprint
from mlpsych.documents import Document
from mlpsych.errors import NormalizerUnavailable, one_line
from mlpsych.models import ModelLoadError, is_random_weights
from mlpsych.normalize.llm import ListNormalizer
from mlpsych.progress import ProgressCallback, ProgressEvent, Stage, Unit
from mlpsych.questions import QuestionSet, QuestionTemplate
from mlpsych.reading.cost import flops
from mlpsych.reading.merge import combine, merge_spans
from mlpsych.reading.reader import Query, Reader
from mlpsych.reading.released import per_entity_answers, released_answers, union_of_models
from mlpsych.retrieval import WindowSelector, cascade, plan_for, restrict
from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)

# Bump when reading changes, so cached spans are not reused across versions (2: long questions borrow from the
# overlap; 3: passages packed into windows; 4: the resolved dtype and the model's revision are in the key).
READER_VERSION = 4
NORMALIZE_CHUNK = 16  # answer lists whose prompts are generated together
# Papers whose windows are read in shared batches: up to this many, or until they have this many windows to read.
PAPERS_PER_READ = 8
WINDOWS_PER_READ = 32


@dataclass
class RunResult:
    """Everything a run produced: answers (all rows), per-paper problems, LLM raw outputs and run facts."""

    documents: list[Document]
    questions: QuestionSet
    answers: list[Answer] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    llm_outputs: list[dict] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def fail(self, doc_id: str, stage: str, error: BaseException) -> None:
        """Record one paper's failure at one stage as its status line (the run goes on without that work)."""
        line = f"{stage}: {one_line(error)}"
        log.warning("%s: %s", doc_id, line)
        self.errors.setdefault(doc_id, []).append(line)


@contextmanager
def isolated(result: RunResult, doc_id: str, stage: str) -> Iterator[None]:
    """Run one paper's share of a stage; an exception becomes that paper's status instead of ending the run.

    A model that cannot be loaded concerns every paper and still stops the run (finished work is cached); an LLM
    that cannot be used concerns every paper too and ends the normalization stage (extractive answers stay).
    """
    try:
        yield
    except (ModelLoadError, NormalizerUnavailable):
        raise
    except Exception as error:  # noqa: BLE001 - one paper's failure must not lose the others
        result.fail(doc_id, stage, error)


@dataclass
class _Unit:
    """One question (or sub-question) asked of one paper."""

    doc: Document
    question: QuestionTemplate
    query: Query
    small_spans: list[Span] | None = None  # the cascade's small reader's spans, when its plan has a cascade


@dataclass
class _Pending:
    """A paper waiting to be read with the current model: its units not in the cache, and every unit's query."""

    doc: Document
    todo: list[int]  # unit indices still to read
    queries: dict[int, Query]  # unit index -> the query read for it (restricted by retrieval)

    @property
    def job(self) -> tuple[Document, list[Query]]:
        return self.doc, [self.queries[i] for i in self.todo]


@dataclass
class _Normalizable:
    """A unit's answers waiting for the LLM: its per-model answer lists and all the rows it produced."""

    unit: _Unit
    per_model: dict[str, list[Answer]]
    rows: list[Answer]


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
        self.windows_read = 0
        self.tokens_read: dict[str, int] = {}  # model -> input tokens read (not cached): its FLOPs in the info
        self.model_loads: list[str] = []
        self.llm_generated = 0  # prompts sent to an LLM (cached outputs are not)
        # Models stay loaded between runs only when asked (a long-lived worker); otherwise each model is released
        # as soon as its stage ends, so encoders and the LLM are never resident together.
        self.keep_loaded = keep_loaded
        self._readers: dict[str, Reader] = {}
        self._normalizers: dict[str, ListNormalizer] = {}
        self._selector: WindowSelector | None = None  # retrieval's scorers, made when a question retrieves

    # -- progress ----------------------------------------------------------------------------------------
    def _report(self, event: ProgressEvent) -> None:
        if self.on_progress:
            self.on_progress(event)

    def plan(self, n_papers: int) -> list[ProgressEvent]:
        """The stages a run over ``n_papers`` readable papers reports, in order, with their units to do (done 0).

        A front end sizes its estimate from this before the first event, and learns every model of the run (the
        LLM included) without knowing the defaults. A follow-up level's sub-questions exist only once the level
        before it is answered: its entries are not ``counted`` until the run reports them (``_report_sizes``).
        """
        planned: list[ProgressEvent] = []
        for level in question_levels(self.questions):
            follow_up = any(q.bridge_from for q in level)
            planned += self._level_stages(level, None if follow_up else {q.id: n_papers for q in level}, n_papers)
        return planned

    def _level_stages(self, level: list[QuestionTemplate], units: dict[str, int] | None,
                      n_papers: int) -> list[ProgressEvent]:
        """One level's stages in the order they run: reads per paper for a first level; for a follow-up level
        sub-questions per question (``units``: question id -> units, None while they are not known)."""
        from mlpsych.normalize.answers import choose_model

        follow_up = any(q.bridge_from for q in level)
        unit: Unit = "sub-question" if follow_up else "paper"

        def size(ids: tuple[str, ...]) -> int:
            if units is None:
                return 0
            return sum(units[q] for q in ids) if follow_up else n_papers

        counted = units is not None
        stages: list[ProgressEvent] = []
        small = self.settings.retrieval.cascade.model
        cascaded = tuple(q.id for q in level if plan_for(q.retrieval, self.settings.retrieval) is not None)
        if small and cascaded:  # the cascade's small reader reads first
            stages.append(ProgressEvent("select", cascaded, small, 0, size(cascaded), unit, counted=counted))
        for model in dict.fromkeys(m for q in level for m in q.models):
            ids = tuple(q.id for q in level if model in q.models)
            stages.append(ProgressEvent("read", ids, model, 0, size(ids), unit, counted=counted))
        if not self.settings.llm.enabled:
            return stages
        by_llm: dict[str, list[str]] = {}
        for q in level:
            if q.normalize:
                by_llm.setdefault(choose_model(q, self.settings.llm.model), []).append(q.id)
        for llm, ids in by_llm.items():
            lists = 0 if units is None else sum(units[q] for q in ids)  # answer lists: one per question and paper
            stages.append(ProgressEvent("normalize", tuple(ids), llm, 0, -(-lists // NORMALIZE_CHUNK), "batch",
                                        counted=counted))
        return stages

    def _report_sizes(self, level: list[QuestionTemplate], units: list[_Unit], n_papers: int) -> None:
        """A follow-up level's sub-questions now exist: report each of its stages with its size (``sizing``), so a
        front end estimates the rest of the run from counted work instead of a guess."""
        if not self.on_progress or not any(q.bridge_from for q in level):
            return
        per_question = {q.id: 0 for q in level}
        for unit in units:
            per_question[unit.question.id] += 1
        for stage in self._level_stages(level, per_question, n_papers):
            self._report(replace(stage, sizing=True))

    # -- reading -----------------------------------------------------------------------------------------
    def _query(self, question: QuestionTemplate, text: str, entity: str | None = None) -> Query:
        return Query(
            question_id=question.id,
            text=text,
            top_k=question.top_k,
            max_answer_tokens=self.settings.reader.max_answer_tokens or question.answer_tokens,
            allow_empty=question.allow_empty,
            bridge_entity=entity,
        )

    def _windowed(self, unit: _Unit, reader: Reader, doc: Document) -> Query:
        """The unit's query restricted to the windows retrieval picks (the tokenizer decides; no model is loaded):
        by the small reader's spans under a cascade, else by the template's retrieval signals."""
        plan = plan_for(unit.question.retrieval, self.settings.retrieval)
        if plan is None or not self._can_window(reader, doc):
            return unit.query
        if self._selector is None:
            self._selector = WindowSelector(self.settings.retrieval)
        if plan.cascade is None:
            return restrict(unit.query, plan, self._selector, reader, doc)
        if unit.small_spans is None:  # the small reader failed on this paper (its status says so): read it all
            return unit.query
        chosen = cascade.restrict(unit.query, plan, self._selector, reader, doc, unit.small_spans)
        return replace(chosen, selected_by=self._cascade_identity())

    @staticmethod
    def _can_window(reader: Reader, doc: Document) -> bool:
        """Whether the reader's tokenizer windows the paper; if not, the paper fails in reading with its own
        message (windowing alone is guarded: a selection error is a bug and must surface)."""
        try:
            reader.windows(doc)
        except ModelLoadError:
            raise
        except Exception as error:  # noqa: BLE001
            log.debug("%s: windowing failed (%s); reading all windows", doc.id, error)
            return False
        return True

    def _small_windowed(self, unit: _Unit, reader: Reader, doc: Document) -> Query:
        """What the cascade's small reader reads for a unit: every window, or its sub-question's entity windows."""
        settings = self.settings.retrieval.cascade
        if not self._can_window(reader, doc):
            return replace(unit.query, top_k=settings.spans, allow_empty=False)
        return cascade.small_query(unit.query, settings, reader, doc)

    def _cascade_identity(self) -> str:
        """The small reader (its fingerprint) and the cascade's settings: what chose a large reader's windows."""
        settings = self.settings.retrieval.cascade
        return make_key(model=model_fingerprint(settings.model), cascade=settings.model_dump(exclude={"model"}),
                        small_reader=self.settings.reader.cache_fields())

    def _cascaded(self, unit: _Unit) -> bool:
        plan = plan_for(unit.question.retrieval, self.settings.retrieval)
        return plan is not None and plan.cascade is not None

    def _read_key(self, doc: Document, model: str, query: Query) -> str:
        return make_key(
            stage="read", version=READER_VERSION, doc=doc.sha256, model=model_fingerprint(model),
            question=query.text, top_k=query.top_k, max_answer_tokens=query.max_answer_tokens,
            allow_empty=query.allow_empty, windows=query.windows, passages=query.passages,
            settings=self.settings.reader.cache_fields(),
            **({"selected_by": query.selected_by} if query.selected_by else {}),
        )

    def _read(self, units: list[_Unit], result: RunResult, label: str) -> dict[tuple[int, str], list[Span]]:
        """Spans per (unit index, model): each model loaded once (only if something is not cached)."""
        self._read_small(units, result, label)
        spans: dict[tuple[int, str], list[Span]] = {}
        for model in dict.fromkeys(m for u in units for m in u.question.models):
            self._read_model(model, [(i, u) for i, u in enumerate(units) if model in u.question.models], spans,
                             result, label)
        return spans

    def _read_small(self, units: list[_Unit], result: RunResult, label: str) -> None:
        """The cascade's first pass: the small reader reads every window for each unit whose plan has a cascade
        (cached like any read); its spans go on the unit, where they choose the large readers' windows."""
        mine = [(i, u) for i, u in enumerate(units) if self._cascaded(u)]
        if not mine:
            return
        model = self.settings.retrieval.cascade.model
        found: dict[tuple[int, str], list[Span]] = {}
        self._read_model(model, mine, found, result, label, "select")
        for i, unit in mine:
            unit.small_spans = found.get((i, model))

    def _read_model(self, model: str, mine: list[tuple[int, _Unit]], spans: dict[tuple[int, str], list[Span]],
                    result: RunResult, label: str, stage: Stage = "read") -> None:
        """Read units with one model (loaded once, released after unless kept), counting its windows and tokens;
        ``stage`` "select" is the cascade's small reader choosing windows."""
        reader = self._readers.get(model) or Reader(model, self.settings.reader)
        windows_before, tokens_before = reader.windows_read, reader.tokens_read
        self._read_with(reader, model, mine, spans, result, label, stage)
        self.windows_read += reader.windows_read - windows_before
        self.tokens_read[model] = self.tokens_read.get(model, 0) + reader.tokens_read - tokens_before
        if self.keep_loaded:
            self._readers[model] = reader
        else:
            reader.release()

    def _read_with(self, reader: Reader, model: str, mine: list[tuple[int, _Unit]],
                   spans: dict[tuple[int, str], list[Span]], result: RunResult, label: str, stage: Stage) -> None:
        """Read every paper's uncached questions with one model, several papers' windows in shared batches
        (when each has few windows to read, as with retrieval); each group is cached as soon as it is read."""
        by_doc: dict[str, list[int]] = {}
        for i, unit in mine:
            by_doc.setdefault(unit.doc.id, []).append(i)
        units = dict(mine)
        follow_up = any(u.question.bridge_from for _, u in mine)  # counted in sub-questions, not papers
        finished = [0, *accumulate(len(indices) if follow_up else 1 for indices in by_doc.values())]
        step = ProgressEvent(stage, tuple(dict.fromkeys(u.question.id for _, u in mine)), model, 0, finished[-1],
                             "sub-question" if follow_up else "paper")
        windowed = self._small_windowed if stage == "select" else self._windowed
        doing = f"{label} · {model.rstrip('/').split('/')[-1]}" + (" choosing windows" if stage == "select" else "")
        bar = tqdm(total=len(by_doc), desc=doing, unit="paper", disable=not self.progress)
        pending: list[_Pending] = []
        waiting = 0  # windows the pending papers will cost, counted once per paper
        for seen, indices in enumerate(by_doc.values(), start=1):
            doc = units[indices[0]].doc
            with isolated(result, doc.id, f"windowing {label} with {model}"):
                queries = {i: windowed(units[i], reader, doc) for i in indices}
                todo = []
                for i in indices:
                    cached = self.cache.get(self._read_key(doc, model, queries[i]))
                    if cached is None:
                        todo.append(i)
                    else:
                        spans[(i, model)] = [self._relabel(Span.from_dict(s), doc, units[i]) for s in cached]
                cost = sum(self._windows_to_read(reader, doc, queries[i]) for i in todo)
                if todo:
                    pending.append(_Pending(doc, todo, queries))
                    waiting += cost
            if len(pending) >= PAPERS_PER_READ or waiting >= WINDOWS_PER_READ:
                self._read_pending(reader, model, pending, spans, result, label,
                                   replace(step, done=finished[seen - len(pending)]))
                waiting = 0
            if not pending:  # everything up to this paper is read and cached
                bar.update(seen - bar.n)
                self._report(replace(step, done=finished[seen]))
        self._read_pending(reader, model, pending, spans, result, label,
                           replace(step, done=finished[len(by_doc) - len(pending)]))
        bar.update(len(by_doc) - bar.n)
        bar.close()
        if by_doc:
            self._report(replace(step, done=finished[-1]))

    @staticmethod
    def _windows_to_read(reader: Reader, doc: Document, query: Query) -> int:
        if query.passages is not None:
            return len(reader.packed_windows(doc, query.passages, query.text))
        return len(reader.windows(doc)) if query.windows is None else len(query.windows)

    def _read_pending(self, reader: Reader, model: str, pending: list[_Pending],
                      spans: dict[tuple[int, str], list[Span]], result: RunResult, label: str,
                      progress: ProgressEvent) -> None:
        """Read the pending papers together and cache what each gave; ``progress``: the stage's papers done so far."""
        if not pending:
            return
        if reader.model is None:
            self._report(replace(progress, loading=True))  # a front end can say "loading model" before the wait
            reader.warm_up()  # a ModelLoadError stops the run: finished work is in the cache
            self.model_loads.append(model)
            self._report(progress)  # loaded: reading starts (a front end stops saying "loading")
        found = self._read_group(reader, model, pending, result, label)
        for paper in pending:
            doc = paper.doc
            with isolated(result, doc.id, f"caching {label} with {model}"):
                for j, i in enumerate(paper.todo if doc.id in found else []):
                    self.cache.put(self._read_key(doc, model, paper.queries[i]),
                                   [s.to_dict() for s in found[doc.id][j]], stage="read")
                    spans[(i, model)] = found[doc.id][j]
        pending.clear()

    @staticmethod
    def _read_group(reader: Reader, model: str, todo: list[_Pending],
                    result: RunResult, label: str) -> dict[str, dict[int, list[Span]]]:
        """Spans per paper id for a group of papers read together; if that fails, each paper is read alone,
        so one paper's failure does not lose the others."""
        jobs = [paper.job for paper in todo]
        if len(jobs) > 1:
            try:
                return {doc.id: found for (doc, _), found in zip(jobs, reader.run_many(jobs))}
            except Exception as error:  # retried paper by paper below, which names the paper at fault
                log.debug("reading a group of %d papers failed (%s); reading them one by one", len(jobs), error)
        out = {}
        for doc, queries in jobs:
            with isolated(result, doc.id, f"reading {label} with {model}"):
                out[doc.id] = reader.run(doc, queries)
        return out

    @staticmethod
    def _relabel(span: Span, doc: Document, unit: _Unit) -> Span:
        """Cached spans are keyed by content, not by names: give them this run's paper and question ids."""
        span.doc_id = doc.id
        span.question_id = unit.question.id
        span.bridge_entity = unit.query.bridge_entity
        span.page = doc.page_at(span.start)
        return span

    # -- answers -----------------------------------------------------------------------------------------
    def _answers(self, unit: _Unit, spans: dict[str, list[Span]]) -> tuple[list[Answer], dict[str, list[Answer]]]:
        """Per-model answer rows and, for several models, the combined rows (by the settings' ``answers`` rules)."""
        rules = self.settings.answers
        per_model = {m: self._model_answers(unit, s) for m, s in spans.items()}
        rows = [a for answers in per_model.values() for a in answers]
        if len(spans) > 1:
            if rules.models == "union":
                combined = union_of_models(per_model)
            else:
                combined = combine(unit.doc, spans, merge=unit.question.merge)
            for a in combined:
                a.ensemble = True
            rows += combined
            final = combined
        else:
            final = rows
        for a in final:
            a.final = True
        return rows, per_model

    def _model_answers(self, unit: _Unit, spans: list[Span]) -> list[Answer]:
        """One model's answers: the released code's per-entity cut for a sub-question, if asked for, else the
        merging rules chosen."""
        rules = self.settings.answers
        if unit.query.bridge_entity is not None and rules.per_entity:
            return per_entity_answers(unit.doc, spans, keep=rules.per_entity)
        if rules.rules == "released":
            return released_answers(unit.doc, spans, merge=unit.question.merge, read=rules.read)
        return merge_spans(unit.doc, spans, merge=unit.question.merge)

    def _normalize(self, level_units: list[_Normalizable], rows: list[Answer], result: RunResult) -> None:
        """LLM normalization for the questions that ask for it; without a usable LLM, extractive answers stay.

        Prompts of several papers go to the model together (``NORMALIZE_CHUNK`` answer lists at a time), so its
        batches are full; each chunk is cached as soon as it is generated.
        """
        wanted = [item for item in level_units if item.unit.question.normalize and self.settings.llm.enabled]
        if not wanted:
            return
        from mlpsych.normalize.answers import choose_model
        from mlpsych.normalize.cache import CachedNormalizer

        by_model: dict[str, list[_Normalizable]] = {}
        for item in wanted:
            by_model.setdefault(choose_model(item.unit.question, self.settings.llm.model), []).append(item)
        for llm, items in by_model.items():
            step = ProgressEvent("normalize", tuple(dict.fromkeys(i.unit.question.id for i in items)), llm, 0,
                                 -(-len(items) // NORMALIZE_CHUNK), "batch")
            self._report(step)
            normalizer = self._normalizers.get(llm) or CachedNormalizer(llm, self.settings.llm, self.cache)
            bar = tqdm(total=len(items), desc=f"normalize · {llm.rstrip('/').split('/')[-1]}", unit="answer list",
                       disable=not self.progress)
            try:
                for batch, chunk_start in enumerate(range(0, len(items), NORMALIZE_CHUNK), start=1):
                    chunk = items[chunk_start : chunk_start + NORMALIZE_CHUNK]
                    self._normalize_chunk(normalizer, llm, chunk, rows, result)
                    bar.update(len(chunk))
                    self._report(replace(step, done=batch))
            except NormalizerUnavailable as error:
                log.warning("normalization skipped, extractive answers kept: %s", error)
                result.info.setdefault("warnings", []).append(f"normalization skipped: {error}")
            finally:
                bar.close()
                self.llm_generated += normalizer.generated
            if self.keep_loaded:
                self._normalizers[llm] = normalizer
            else:
                normalizer.release()

    def _normalize_chunk(self, normalizer: ListNormalizer, llm: str, chunk: list[_Normalizable], rows: list[Answer],
                         result: RunResult) -> None:
        """One chunk of answer lists through the LLM; a paper whose prompts, generation or answers fail keeps its
        extractive answers and gets the failure as its status, the others are normalized."""
        from mlpsych.normalize.answers import combine_results, prompts_for

        prompts: dict[int, dict[str, str]] = {}
        for i, item in enumerate(chunk):
            with isolated(result, item.unit.doc.id, f"normalizing {item.unit.question.id}"):
                prompts[i] = prompts_for(item.unit.question, item.per_model,
                                         max_input_items=self.settings.llm.max_input_items,
                                         input_format=self.settings.llm.input_format)
        outputs = self._generate(normalizer, chunk, prompts, result)
        for i, results in outputs.items():
            item = chunk[i]
            with isolated(result, item.unit.doc.id, f"normalizing {item.unit.question.id}"):
                normalized, audit = combine_results(item.unit.doc, item.unit.question, item.per_model, results,
                                                    llm=llm, prompts=prompts[i])
                self._adopt(item.unit, normalized, audit, item.rows, result, llm, self.settings.llm.keep_ungrounded)
                rows.extend(normalized)

    @staticmethod
    def _generate(normalizer: ListNormalizer, chunk: list[_Normalizable], prompts: dict[int, dict[str, str]],
                  result: RunResult) -> dict[int, dict]:
        """LLM results per chunk index and model, generated together; if that fails, each answer list alone, so
        the failure is the status of the paper that caused it."""
        def generate(indices: list[int]) -> dict[int, dict]:
            flat = [(i, model, text) for i in indices for model, text in prompts[i].items()]
            outputs = normalizer.run([text for _, _, text in flat])
            found: dict[int, dict] = {i: {} for i in indices}
            for (i, model, _), output in zip(flat, outputs):
                found[i][model] = output
            return found

        if len(prompts) > 1:
            try:
                return generate(list(prompts))
            except NormalizerUnavailable:
                raise
            except Exception as error:  # noqa: BLE001 - retried one answer list at a time below
                log.debug("generating a chunk of %d answer lists failed (%s); one at a time", len(prompts), error)
        found: dict[int, dict] = {}
        for i in prompts:  # a paper whose generation fails keeps its extractive answers
            with isolated(result, chunk[i].unit.doc.id, f"normalizing {chunk[i].unit.question.id}"):
                found.update(generate([i]))
        return found

    @staticmethod
    def _adopt(unit: _Unit, normalized: list[Answer], audit: dict, extractive: list[Answer], result: RunResult,
               llm: str, keep_ungrounded: bool = False) -> None:
        """Mark one answer list's normalized rows final (and its extractive rows not) when they are the answer;
        with ``keep_ungrounded`` items the paper does not contain are answers too (their stage says so)."""
        answer_stages = ("normalized", "ungrounded") if keep_ungrounded else ("normalized",)
        for model, text in audit["raw_outputs"].items():
            result.llm_outputs.append({"paper_id": unit.doc.id, "question_id": unit.question.id,
                                       "llm": llm, "model": model, "raw_output": text})
        for model, error in audit["errors"].items():
            result.errors.setdefault(unit.doc.id, []).append(f"normalize {unit.question.id} ({model}): {error}")
        grounded = [a for a in normalized if a.stage in answer_stages]
        # An empty list is an answer for questions that may have none (q2), unless the LLM's output failed.
        if grounded or (unit.question.allow_empty and not audit["errors"]):
            for a in extractive:
                a.final = False
        for a in normalized:
            a.final = a.stage in answer_stages
            a.bridge_entity = unit.query.bridge_entity

    # -- the run -----------------------------------------------------------------------------------------
    def _units(self, level: list[QuestionTemplate], docs: list[Document], rows: list[Answer],
               result: RunResult) -> list[_Unit]:
        finals: dict[tuple[str, str], list[Answer]] = {}
        for a in rows:
            if a.final:
                finals.setdefault((a.doc_id, a.question_id), []).append(a)
        units = []
        for doc in docs:
            for q in level:
                if not q.bridge_from:
                    units.append(_Unit(doc, q, self._query(q, q.text)))
                    continue
                with isolated(result, doc.id, f"multi-hop {q.id}"):
                    units.extend(self._sub_units(doc, q, finals.get((doc.id, q.bridge_from), [])))
        return units

    def _sub_units(self, doc: Document, question: QuestionTemplate, bridge: list[Answer]) -> list[_Unit]:
        """One unit per bridge entity of this paper (the multi-hop step)."""
        from mlpsych.multihop import bridge_entities, entities_to_ask, sub_questions

        cap = self.settings.max_sub_questions or question.max_sub_questions
        retrieving = plan_for(question.retrieval, self.settings.retrieval) is not None
        stages = ("normalized", "ungrounded") if self.settings.llm.keep_ungrounded else ("normalized",)
        entities = entities_to_ask(question, bridge_entities(bridge, cap, self.settings.answers.entity_case, stages),
                                   retrieving)
        return [_Unit(doc, question, self._query(question, text, entity))
                for entity, text in sub_questions(question, entities)]

    def run(self, documents: list[Document]) -> RunResult:
        started = time.time()
        result = RunResult(documents=documents, questions=self.questions)
        docs = []
        for doc in documents:
            if not doc.ok:
                result.errors.setdefault(doc.id, []).append(doc.status)
                continue
            with isolated(result, doc.id, "hashing"):
                if doc.text.strip() and doc.sha256:  # a text that cannot be hashed cannot be cached: it fails alone
                    docs.append(doc)
        rows: list[Answer] = []
        for level in question_levels(self.questions):
            units = self._units(level, docs, rows, result)
            self._report_sizes(level, units, len(docs))
            label = ",".join(q.id for q in level)
            spans = self._read(units, result, label)
            level_units = []
            for i, unit in enumerate(units):
                got = {m: spans[(i, m)] for m in unit.question.models if (i, m) in spans}
                if not got:
                    continue
                with isolated(result, unit.doc.id, f"merging {unit.question.id}"):
                    unit_rows, per_model = self._answers(unit, got)
                    rows.extend(unit_rows)
                    level_units.append(_Normalizable(unit, per_model, unit_rows))
            self._normalize(level_units, rows, result)
        self._confidence(rows, docs, result)
        result.answers = rows
        result.info.update(self._info(started))
        return result

    def _confidence(self, rows: list[Answer], docs: list[Document], result: RunResult) -> None:
        """The confidence stage, after the answers are final: each final answer's calibrated probability that a
        coder marks it correct (kept one call here, so it moves as one stage into the stage list)."""
        from mlpsych.coding.confidence import Calibrator, add_confidence

        calibrator = Calibrator.load(self.settings.answers.calibrator)
        add_confidence(rows, {d.id: d.text for d in docs}, {q.id: q.kind for q in self.questions.questions},
                       calibrator)
        result.info["calibrator"] = self.settings.answers.calibrator or "default: " + calibrator.fitted_on.get(
            "description", "development papers")

    def release(self) -> None:
        """Free every model kept loaded with ``keep_loaded``."""
        for reader in self._readers.values():
            reader.release()
        for normalizer in self._normalizers.values():
            normalizer.release()
        self._readers.clear()
        self._normalizers.clear()

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

    @staticmethod
    def _gflops(model: str, tokens: int) -> float | None:
        """GFLOPs of a model's reading for the run sheet; None where its architecture cannot be told (a Hub model
        whose config is not on this machine, all its reads cached): the run's results never wait on it."""
        try:
            return round(flops(model, tokens) / 1e9, 1)
        except Exception as error:  # noqa: BLE001 - a figure for the run sheet, not worth failing a run for
            log.debug("no FLOPs for %s: %s", model, error)
            return None

    def _info(self, started: float) -> dict:
        import torch
        import transformers

        return {
            "mlpsych": __version__,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "platform": platform.platform(),
            "questions": self.questions.source,
            "models": sorted({m for q in self.questions.questions for m in q.models}),
            "adapted_readers": self._adapted(),
            # random-weight models (the demo's): their answers are meaningless, and the front ends and sheets say so
            "demo_models": sorted({e.model for e in self.plan(1) if is_random_weights(e.model)}),
            "settings": self.settings.describe(),
            # "auto" differs between machines (bf16 where the CPU has it): what the readers ran in, to reproduce
            "reader_dtype": self.settings.reader.cache_fields()["dtype"],
            "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
            "seconds": round(time.time() - started, 2),
            "cache": str(self.cache.path),
            "cache_hits": self.cache.hits,
            "cache_misses": self.cache.misses,
            "windows_read": self.windows_read,
            "tokens_read": dict(self.tokens_read),
            "reader_gflops": {m: self._gflops(m, t) for m, t in self.tokens_read.items()},
            "models_loaded": list(self.model_loads),
            "llm_prompts_generated": self.llm_generated,
        }
