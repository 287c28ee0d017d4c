"""The reading stages: the cascade's small reader choosing windows (select), then each question's readers (read).

Each model is loaded once per level, reads every paper for all its questions, and is released before the next
model. Its reads go through a :class:`CachedReader`, which owns their cache keys, batching and checkpoints (a long
paper's read saved as it goes, mlpsych.pipeline.checkpoints) and returns spans by unit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import accumulate

from tqdm.auto import tqdm

from mlpsych.answers import Span
from mlpsych.cache import READ_STAGE, library_versions, make_key, model_fingerprint
from mlpsych.documents import Document
from mlpsych.pipeline.checkpoints import CachedCheckpoints
from mlpsych.pipeline.context import ModelPool, StageContext
from mlpsych.pipeline.records import Level, LevelSize, Unit, reading_unit
from mlpsych.pipeline.result import RunResult, isolated
from mlpsych.pipeline.retrieve import cascaded, large_query, small_query
from mlpsych.progress import ProgressEvent, Stage
from mlpsych.reading.reader import Query, Reader
from mlpsych.retrieval import plan_for
from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)

# Bump when reading changes, so cached spans are not reused across versions (2: long questions borrow from the
# overlap; 3: passages packed into windows; 4: the resolved dtype and the model's revision are in the key; 5: a
# tokenizer built from spiece.model alone gives transformers 4.57's offsets, which moves ALBERT's spans).
READER_VERSION = 5
# Papers whose windows are read in shared batches: up to this many, or until they have this many windows to read.
PAPERS_PER_READ = 8
WINDOWS_PER_READ = 32

# What a reader reads for a unit of a paper (``retrieve.large_query`` or ``retrieve.small_query``).
WindowChoice = Callable[[Unit, Reader, Document, RunSettings, ModelPool], Query]


@dataclass
class _Pending:
    """A paper waiting to be read with the current model: its units not in the cache, and every unit's query."""

    doc: Document
    todo: list[int]  # unit indices still to read
    queries: dict[int, Query]  # unit index -> the query read for it (restricted by retrieval)

    @property
    def job(self) -> tuple[Document, list[Query]]:
        return self.doc, [self.queries[i] for i in self.todo]


def windows_to_read(reader: Reader, doc: Document, query: Query) -> int:
    """How many windows reading ``query`` costs: what decides when a group of papers is read together."""
    if query.passages is not None:
        return len(reader.packed_windows(doc, query.passages, query.text))
    return len(reader.windows(doc)) if query.windows is None else len(query.windows)


def relabel(span: Span, doc: Document, unit: Unit) -> Span:
    """Cached spans are keyed by content, not by names: give them this run's paper and question ids, and the
    evidence as this version cuts it (a cache made before a change to the evidence sentence kept the old one, so a
    rerun's sheet differed from a fresh run's)."""
    span.doc_id = doc.id
    span.question_id = unit.question.id
    span.bridge_entity = unit.query.bridge_entity
    span.page = doc.page_at(span.start)
    span.evidence = doc.sentence_around(span.start, span.end)
    return span


class CachedReader:
    """One reader model behind the result cache: reads units (several papers' windows in shared batches), caches
    each group as soon as it is read, and returns the spans by unit; loads the model only if something is not
    cached."""

    def __init__(self, model: str, reader: Reader, ctx: StageContext) -> None:
        self.model = model
        self.reader = reader
        self.ctx = ctx
        self.checkpoints = CachedCheckpoints(ctx.cache, self.key)

    def key(self, doc: Document, query: Query) -> str:
        """What a read's spans depend on: the paper, the model, the question and the windows, and the settings."""
        return make_key(
            stage=READ_STAGE, version=READER_VERSION, doc=doc.sha256, model=model_fingerprint(self.model),
            question=query.text, top_k=query.top_k, max_answer_tokens=query.max_answer_tokens,
            allow_empty=query.allow_empty, windows=query.windows, passages=query.passages,
            settings=self.ctx.settings.reader.cache_fields(), libraries=library_versions(),
            **({"selected_by": query.selected_by} if query.selected_by else {}),
        )

    def read(self, units: list[Unit], choose: WindowChoice, stage: Stage, label: str) -> dict[int, list[Span]]:
        """Spans per index in ``units`` (a unit whose paper failed has none), counting the windows and tokens
        read; ``stage`` "select" is the cascade's small reader choosing windows."""
        windows_before, tokens_before = self.reader.windows_read, self.reader.tokens_read
        found = self._read(units, choose, stage, label)
        counters = self.ctx.counters
        counters.windows_read += self.reader.windows_read - windows_before
        counters.tokens_read[self.model] = (counters.tokens_read.get(self.model, 0) + self.reader.tokens_read
                                            - tokens_before)
        return found

    def _read(self, units: list[Unit], choose: WindowChoice, stage: Stage, label: str) -> dict[int, list[Span]]:
        ctx, model, reader = self.ctx, self.model, self.reader
        by_doc: dict[str, list[int]] = {}
        for i, unit in enumerate(units):
            by_doc.setdefault(unit.doc.id, []).append(i)
        # done after each paper: papers, or a follow-up level's sub-questions (a paper can have many)
        counted_in = reading_unit([u.question for u in units])
        finished = [0, *accumulate(len(indices) if counted_in == "sub-question" else 1
                                   for indices in by_doc.values())]
        step = ProgressEvent(stage, tuple(dict.fromkeys(u.question.id for u in units)), model, 0, finished[-1],
                             counted_in)
        doing = f"{label} · {model.rstrip('/').split('/')[-1]}" + (" choosing windows" if stage == "select" else "")
        bar = tqdm(total=len(by_doc), desc=doing, unit="paper", disable=not ctx.progress)
        spans: dict[int, list[Span]] = {}
        pending: list[_Pending] = []
        waiting = 0  # windows the pending papers will cost, counted once per paper
        for seen, indices in enumerate(by_doc.values(), start=1):
            doc = units[indices[0]].doc
            with isolated(ctx.result, doc.id, f"windowing {label} with {model}"):
                queries = {i: choose(units[i], reader, doc, ctx.settings, ctx.models) for i in indices}
                todo = []
                for i in indices:
                    cached = ctx.cache.get(self.key(doc, queries[i]))
                    if cached is None:
                        todo.append(i)
                    else:
                        spans[i] = [relabel(Span.from_dict(s), doc, units[i]) for s in cached]
                cost = sum(windows_to_read(reader, doc, queries[i]) for i in todo)
                if todo:
                    pending.append(_Pending(doc, todo, queries))
                    waiting += cost
            if len(pending) >= PAPERS_PER_READ or waiting >= WINDOWS_PER_READ:
                self._read_pending(pending, spans, label, replace(step, done=finished[seen - len(pending)]),
                                   finished[seen])
                waiting = 0
            if not pending:  # everything up to this paper is read and cached
                bar.update(seen - bar.n)
                ctx.report(replace(step, done=finished[seen]))
        self._read_pending(pending, spans, label, replace(step, done=finished[len(by_doc) - len(pending)]),
                           finished[-1])
        bar.update(len(by_doc) - bar.n)
        bar.close()
        if by_doc:
            ctx.report(replace(step, done=finished[-1]))
        return spans

    def _read_pending(self, pending: list[_Pending], spans: dict[int, list[Span]], label: str,
                      progress: ProgressEvent, done_after: int) -> None:
        """Read the pending papers together and cache what each gave; ``progress``: the stage's units done so far,
        ``done_after``: once they are read."""
        if not pending:
            return
        ctx = self.ctx
        if self.reader.model is None:
            ctx.report(replace(progress, loading=True))  # a front end can say "loading model" before the wait
            self.reader.warm_up()  # a ModelLoadError stops the run: finished work is in the cache
            ctx.counters.model_loads.append(self.model)
            ctx.report(progress)  # loaded: reading starts (a front end stops saying "loading")
        self.reader.on_batch = self._reporting(progress, done_after)
        self.reader.checkpoints = self.checkpoints
        try:
            found = read_group(self.reader, self.model, pending, ctx.result, label)
        finally:
            self.reader.on_batch = self.reader.checkpoints = None
        for paper in pending:
            doc = paper.doc
            with isolated(ctx.result, doc.id, f"caching {label} with {self.model}"):
                for j, i in enumerate(paper.todo if doc.id in found else []):
                    ctx.cache.put(self.key(doc, paper.queries[i]), [s.to_dict() for s in found[doc.id][j]],
                                  stage=READ_STAGE)
                    spans[i] = found[doc.id][j]
        self.checkpoints.drop([paper.job for paper in pending], found)
        pending.clear()

    def _reporting(self, start: ProgressEvent, end: int) -> Callable[[int, int], None]:
        """The reader's per-batch hook while a group is read: the stage's units done move from ``start.done``
        toward ``end`` with the windows read (in steps of a hundredth), so a paper hundreds of pages long moves the
        bar and gives a time left long before it is finished (it stood at "paper 0 of 1" for the whole read)."""
        shown = 0.0

        def on_batch(read: int, total: int) -> None:
            nonlocal shown
            part = read / total
            if 0.01 <= part - shown and part < 1:
                shown = part
                self.ctx.report(replace(start, done=start.done + part * (end - start.done)))

        return on_batch


def read_group(reader: Reader, model: str, todo: list[_Pending], result: RunResult,
               label: str) -> dict[str, dict[int, list[Span]]]:
    """Spans per paper id for a group of papers read together; if that fails, each paper is read alone, so one
    paper's failure does not lose the others."""
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


def read_with(model: str, units: list[Unit], choose: WindowChoice, stage: Stage, level: Level,
              ctx: StageContext) -> dict[int, list[Span]]:
    """Read ``units`` with one model, loaded once for the stage (released after unless kept)."""
    with ctx.models.reader(model, ctx.settings, ctx.cache.directory) as reader:
        return CachedReader(model, reader, ctx).read(units, choose, stage, level.label)


class SelectStage:
    """The cascade's first pass: the small reader reads every window for each unit whose plan has a cascade
    (cached like any read); its spans go on the unit (``small_spans``), where they choose the large readers'
    windows."""

    name = "select"

    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        small = self.settings.retrieval.cascade.model
        ids = tuple(q.id for q in size.questions if plan_for(q.retrieval, self.settings.retrieval) is not None)
        return [size.event("select", ids, small, size.reads(ids))] if small and ids else []

    def run(self, level: Level, ctx: StageContext) -> None:
        mine = [u for u in level.units if cascaded(u, self.settings)]
        if not mine:
            return
        found = read_with(self.settings.retrieval.cascade.model, mine, small_query, "select", level, ctx)
        for i, unit in enumerate(mine):
            unit.small_spans = found.get(i)


class ReadStage:
    """Each question's readers, one model at a time, each reading the windows retrieval (or the cascade) chose;
    their spans go on the unit (``spans``, by model)."""

    name = "read"

    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        events = []
        for model in dict.fromkeys(m for q in size.questions for m in q.models):
            ids = tuple(q.id for q in size.questions if model in q.models)
            events.append(size.event("read", ids, model, size.reads(ids)))
        return events

    def run(self, level: Level, ctx: StageContext) -> None:
        for model in dict.fromkeys(m for u in level.units for m in u.question.models):
            mine = [u for u in level.units if model in u.question.models]
            for i, spans in read_with(model, mine, large_query, "read", level, ctx).items():
                mine[i].spans[model] = spans
