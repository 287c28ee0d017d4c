"""Which windows of a paper a unit's reader reads: all of them, those retrieval picks, or, under a cascade, those
where the small reader's spans weigh most. Only the tokenizer is used here (no model is loaded)."""

from __future__ import annotations

import logging
from dataclasses import replace

from mlpsych.cache import library_versions, make_key, model_fingerprint
from mlpsych.documents import Document
from mlpsych.errors import ModelLoadError
from mlpsych.pipeline.context import ModelPool
from mlpsych.pipeline.records import Unit
from mlpsych.reading.reader import Query, Reader
from mlpsych.retrieval import cascade, plan_for, restrict
from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)


def cascaded(unit: Unit, settings: RunSettings) -> bool:
    """Whether the unit's windows are chosen by the cascade's small reader: under a cascade, unless every reader
    of a sub-question reads windows chosen for its bridge's source question (``unit.source``)."""
    plan = plan_for(unit.question.retrieval, settings.retrieval)
    return plan is not None and plan.cascade is not None and not set(unit.question.models) <= set(unit.source)


def can_window(reader: Reader, doc: Document) -> bool:
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


def large_query(unit: Unit, reader: Reader, doc: Document, settings: RunSettings, models: ModelPool) -> Query:
    """The unit's query restricted to the windows retrieval picks: by the small reader's spans under a cascade
    (noted on the unit, for its sub-questions) or those chosen for the bridge's source question (``unit.source``),
    else by the template's retrieval signals."""
    plan = plan_for(unit.question.retrieval, settings.retrieval)
    if plan is None or not can_window(reader, doc):
        return unit.query
    selector = models.selector(settings)
    if plan.cascade is None:
        return restrict(unit.query, plan, selector, reader, doc)
    if reader.model_id in unit.source:  # every window when none is found again (not expected: same reader)
        windows = cascade.windows_at(reader.windows(doc), unit.source[reader.model_id]) or None
        return replace(unit.query, windows=windows, passages=None, selected_by=cascade_identity(settings))
    if unit.small_spans is None:  # the small reader failed on this paper (its status says so): read it all
        return unit.query
    chosen = cascade.restrict(unit.query, plan, selector, reader, doc, unit.small_spans)
    unit.chosen[reader.model_id] = cascade.ranges_of(reader.windows(doc), chosen.windows)
    return replace(chosen, selected_by=cascade_identity(settings))


def small_query(unit: Unit, reader: Reader, doc: Document, settings: RunSettings, models: ModelPool) -> Query:
    """What the cascade's small reader reads for a unit: every window, or its sub-question's entity windows."""
    cascade_settings = settings.retrieval.cascade
    if not can_window(reader, doc):
        return replace(unit.query, top_k=cascade_settings.spans, allow_empty=False)
    return cascade.small_query(unit.query, cascade_settings, reader, doc)


def cascade_identity(settings: RunSettings) -> str:
    """The small reader (its fingerprint) and the cascade's settings: what chose a large reader's windows."""
    cascade_settings = settings.retrieval.cascade
    # tool_windows off adds nothing to the key, so results cached before it existed stay valid
    unset = set() if cascade_settings.tool_windows else {"tool_windows"}
    return make_key(model=model_fingerprint(cascade_settings.model),
                    cascade=cascade_settings.model_dump(exclude={"model"} | unset),
                    small_reader=settings.reader.cache_fields(), libraries=library_versions())
