"""The cascade: a small SQuAD2 reader reads the whole paper, the large readers read where its answers are.

Hand-written vocabularies and fixed budgets, tuned on a few dozen papers, did not carry to new papers (the
retrieval issue's figures). A small reader trained for the same task (MiniLM, TinyRoBERTa: a fourteenth to a
seventh of a large reader's FLOPs per token, ``mlpsych.reading.cost``) knows what an answer to the question looks
like on any paper. It reads every window for the question (a bridged sub-question: the windows that name its
entity) and returns its best spans with their probabilities; a window of the large reader is worth what those
spans inside it weigh. The large reader's windows are then taken best first until they hold a share (``mass``)
of the small reader's total: the number of windows follows how concentrated the small reader's answers are in
this paper, not a constant per question. The order may fuse, by reciprocal rank, the small reader's weight with
BM25 on the question or the template's retrieval signals (what the fast preset does: alone, the small reader's
best spans gather on a few windows while a paper's list of methods is spread over it). Windows of both readers
are matched through characters, so their tokenizers may differ.

A bridged sub-question ("What was random forest used for?") can skip the small reader (``bridge_windows:
source``): the windows already chosen for its source question (q1, which found the entity) that name the entity
are where a paper says what the technique was used for, as often as not, and they cost no small read and fewer
large windows than a fresh choice among every window naming it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from mlpsych.answers import Span
from mlpsych.documents import Document
from mlpsych.reading.reader import Query, Reader
from mlpsych.reading.windows import Window
from mlpsych.retrieval.ranking import (
    Plan,
    WindowSelector,
    entity_names,
    entity_windows,
    mentions_entity,
    window_texts,
)
from mlpsych.retrieval.signals import reciprocal_rank_fusion
from mlpsych.retrieval.tools import tool_marks
from mlpsych.settings import CascadeSettings


def small_query(query: Query, settings: CascadeSettings, small: Reader, doc: Document) -> Query:
    """What the small reader reads for ``query``: every window, or for a sub-question the windows (of its own
    tokenizer) that mention the entity (all of them when none does); its ``spans`` best spans are kept."""
    windows = None
    if query.bridge_entity:
        anchored = entity_windows(doc, small.windows(doc), query.bridge_entity)
        windows = tuple(anchored) if anchored else None
    return replace(query, top_k=settings.spans, allow_empty=False, windows=windows, passages=None)


def span_mass(windows: Sequence[Window], spans: Sequence[Span]) -> tuple[np.ndarray, list[list[int]]]:
    """Each window's weight (the summed probability of the small reader's spans lying wholly in it) and, per
    window, which spans those are."""
    inside: list[list[int]] = []
    for w in windows:
        inside.append([k for k, s in enumerate(spans) if w.char_start <= s.start and s.end <= w.char_end])
    weights = np.asarray([sum(max(spans[k].score, 0.0) for k in ks) for ks in inside], dtype=np.float64)
    return weights, inside


def choose_windows(order: Sequence[int], inside: Sequence[Sequence[int]], scores: Sequence[float],
                   settings: CascadeSettings) -> list[int]:
    """Windows taken in ``order`` until those taken hold ``mass`` of the spans' total score (a span in two
    overlapping windows counts once), at least ``min_windows`` and at most ``max_windows`` of them. Without any
    span (the small reader found nothing to weigh) there is nothing to choose by: every window, up to the cap."""
    total = float(sum(max(s, 0.0) for s in scores))
    limit = settings.max_windows or len(order)
    if total <= 0:
        return [int(i) for i in order[:limit]]
    wanted = settings.mass * total
    held, seen, chosen = 0.0, set(), []
    for i in order:
        if len(chosen) >= limit or (len(chosen) >= settings.min_windows and held >= wanted - 1e-12):
            break
        chosen.append(int(i))
        for k in inside[i]:
            if k not in seen:
                seen.add(k)
                held += max(scores[k], 0.0)
    return chosen


def window_order(weights: np.ndarray, plan: Plan, selector: WindowSelector, doc: Document,
                 windows: Sequence[Window], question: str) -> list[int]:
    """Windows best first: by the small reader's weight, or fused by rank with BM25 / the template's signals."""
    fuse = plan.cascade.fuse if plan.cascade else "small"
    if fuse == "small":
        return [int(i) for i in np.argsort(-weights, kind="stable")]
    signals = ("question",) if fuse == "question" else (plan.signals or ("question",))
    lists = [weights] + [selector.scores(plan, question, window_texts(doc, windows), s) for s in signals]
    return [int(i) for i in np.argsort(-reciprocal_rank_fusion(lists, shared_ties=True), kind="stable")]


def select(doc: Document, windows: Sequence[Window], question: str, plan: Plan, selector: WindowSelector,
           spans: Sequence[Span]) -> tuple[int, ...] | None:
    """The large reader's windows for one question, ascending; None when that is every window."""
    if not windows:
        return None
    weights, inside = span_mass(windows, spans)
    order = window_order(weights, plan, selector, doc, windows, question)
    chosen = set(choose_windows(order, inside, [s.score for s in spans], plan.cascade))
    if plan.cascade.tool_windows and "software" in plan.signals:
        chosen |= marked_windows(doc, windows)
    return None if len(chosen) == len(windows) else tuple(sorted(chosen))


def marked_windows(doc: Document, windows: Sequence[Window]) -> set[int]:
    """Positions of the ``windows`` holding a place where the paper marks a tool as software (a small reader
    that never saw a tool's name may not weigh the aside that names it)."""
    marks = tool_marks(doc.text)
    return {i for i, w in enumerate(windows) if any(w.char_start <= a and b <= w.char_end for a, b in marks)}


def restrict(query: Query, plan: Plan, selector: WindowSelector, reader: Reader, doc: Document,
             spans: Sequence[Span]) -> Query:
    """``query`` limited to the large reader's windows where the small reader's ``spans`` weigh most."""
    return replace(query, windows=select(doc, reader.windows(doc), query.text, plan, selector, spans), passages=None)


Ranges = tuple[tuple[int, int], ...]  # windows by their characters: the same for every reader of one tokenizer


def ranges_of(windows: Sequence[Window], chosen: Sequence[int] | None) -> Ranges:
    """The character ranges of the windows ``chosen`` (every window when None), to be found again at a later level."""
    picked = windows if chosen is None else [windows[i] for i in chosen]
    return tuple((w.char_start, w.char_end) for w in picked)


def naming(doc: Document, ranges: Sequence[tuple[int, int]], entity: str) -> Ranges:
    """Those of ``ranges`` whose text names ``entity`` (the entity matching of ``entity_windows``): what a
    sub-question reads under ``bridge_windows: source``; empty where none does (it is then read as before)."""
    names = entity_names(entity, doc.text)
    return tuple((a, b) for a, b in ranges if mentions_entity(names, doc.text[a:b]))


def windows_at(windows: Sequence[Window], ranges: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """Indices of the reader's ``windows`` that are the ``ranges`` (a reader of another tokenizer finds none)."""
    wanted = set(ranges)
    return tuple(w.index for w in windows if (w.char_start, w.char_end) in wanted)
