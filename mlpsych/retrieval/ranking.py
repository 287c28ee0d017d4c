"""Which windows of a paper are worth reading for a question: BM25 / dense scoring and entity-anchored windows.

Reading every window of a paper for every question and model is what makes the paper's approach slow on a
laptop (hundreds of large-model windows per paper). Here the windows the reader already cut (one tokenization
per tokenizer) are scored against the question and only the best ``budget`` are read. BM25 (through the
``bm25s`` library) is the dependable default: no model, milliseconds per paper. Dense scoring with the offline
MiniLM sentence encoder is an option. A bridged sub-question ("What was random forest used for?") reads only
the windows that mention its entity or a variant of it (plural, hyphen/space, case, "long form (ABBR)" pairs
defined in the paper), using the same matching rules as the grounding of LLM answers, plus the
``entity_extra`` windows of the whole paper that rank best for the sub-question (a technique's purpose is often
stated where the paper speaks of "machine learning" in general, not of the technique by name).

A template can say what else marks a window worth reading (``retrieval.signals``, see
:mod:`mlpsych.retrieval.signals`): method names for q1, software names for q2, aims for q3. Several signals are
combined by reciprocal-rank fusion; ``diverse`` picks windows that add methods not yet covered.

With ``unit: sentence`` the selector picks sentences instead of windows, and the reader packs them into windows
(:func:`mlpsych.reading.windows.pack_passages`): a paper names its methods in a few dozen sentences spread over all its
sections, which fill a handful of windows, while the windows around them are mostly other text.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import sys
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from mlpsych.documents import Document, sentence_spans
from mlpsych.questions import RetrievalSpec
from mlpsych.reading.reader import Query, Reader
from mlpsych.reading.windows import Window
from mlpsych.retrieval.signals import TERM_SIGNALS, diverse_order, reciprocal_rank_fusion, signal_scores, window_terms
from mlpsych.settings import CascadeSettings, RetrievalSettings

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
# Words of a question that say nothing about where its answer is ("What was ... used for?").
_QUESTION_WORDS = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "was", "were", "is",
                   "are", "did", "do", "does", "used", "use", "using", "perform", "performed"}


def _stem(word: str) -> str:
    """Plural and a few inflections folded, so "forests" finds "forest" (BM25 needs equal tokens)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@functools.cache
def _bm25s():
    """``bm25s``, imported without letting it start JAX. Its import runs a JAX top-k where JAX is installed (for its
    ``retrieve``, which mlpsych does not call), and on a GPU JAX then takes 75% of the GPU's memory for itself: the
    readers and the LLM ran out of memory beside it on the device machine. Where the process has already imported
    JAX (a notebook using it), JAX is left as the process set it up."""
    blocked = "bm25s" not in sys.modules and "jax" not in sys.modules
    if blocked:
        sys.modules["jax"] = None  # type: ignore[assignment]  # `import jax` raises ImportError meanwhile
    try:
        import bm25s
    finally:
        if blocked:
            del sys.modules["jax"]
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import: a line per index build
    return bm25s


@functools.cache
def _stopwords() -> frozenset[str]:
    return frozenset(_bm25s().stopwords.STOPWORDS_EN)


def tokenize(text: str, *, drop: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Lowercased, stemmed word tokens without English stopwords (and without ``drop``)."""
    stop = _stopwords() | drop if drop else _stopwords()
    return [_stem(w) for w in (m.group().lower() for m in _TOKEN.finditer(text)) if w not in stop and len(w) > 1]


def window_texts(doc: Document, windows: Sequence[Window]) -> list[str]:
    return [doc.text[w.char_start : w.char_end] for w in windows]


def bm25_scores(question: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 score of each text for the question (``bm25s``: Lucene-style idf over these texts only)."""
    bm25s = _bm25s()
    corpus = [tokenize(t) for t in texts]
    query = tokenize(question, drop=_QUESTION_WORDS) or tokenize(question)
    if not texts or not query:
        return np.zeros(len(texts), dtype=np.float32)
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    vocab = set(index.vocab_dict) if hasattr(index, "vocab_dict") else None
    query = [t for t in query if vocab is None or t in vocab]
    if not query:
        return np.zeros(len(texts), dtype=np.float32)
    return np.asarray(index.get_scores(query), dtype=np.float32)


class DenseScorer:
    """Cosine similarity of question and windows with a sentence encoder (default: the offline MiniLM)."""

    def __init__(self, model: str | None = None) -> None:
        from mlpsych.embeddings import Embedder

        self.embedder = Embedder(model)

    def __call__(self, question: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.float32)
        vectors = self.embedder.encode(list(texts))
        return vectors @ self.embedder.encode([question])[0]


def entity_names(entity: str, text: str) -> list[str]:
    """The entity and its known variants in this paper: the other half of a "long form (ABBR)" definition."""
    from mlpsych.normalize.grounding import aliases

    return aliases(" ".join(entity.split()), text)


def mentions_entity(names: Sequence[str], text: str) -> bool:
    """Whether the text mentions any of the names (grounding rules: case, plural, hyphen/space, abbreviations)."""
    from mlpsych.normalize.grounding import ground

    return any(ground(name, text).grounded for name in names)


def entity_windows(doc: Document, windows: Sequence[Window], entity: str) -> list[int]:
    """Indices of the windows that mention the entity or one of its variants defined in the paper."""
    names = entity_names(entity, doc.text)
    return [w.index for w, text in zip(windows, window_texts(doc, windows)) if mentions_entity(names, text)]


@dataclass(frozen=True)
class Plan:
    """How one question is to be read: which scorer, how many windows, whether to anchor on its entity."""

    mode: str
    budget: int
    neighbours: int = 0
    entity_anchor: bool = True
    entity_budget: int | None = None
    terms: str = ""  # words added to the question for scoring (the template's retrieval query), e.g. "software package"
    signals: tuple[str, ...] = ("question",)  # fused by reciprocal rank; "question" = BM25/dense on question + terms
    diverse: bool = False  # prefer windows that add terms (of the term signals) not yet covered
    entity_extra: int = 0  # a bridged sub-question also reads this many best windows of the whole paper
    share: float | None = None  # read this share of the paper's windows, at least ``budget``
    max_budget: int | None = None  # and at most this many
    unit: str = "window"  # or "sentence": sentences packed into the budget's windows
    cascade: CascadeSettings | None = None  # a small reader's spans choose the windows (retrieval.cascade)

    def windows_for(self, n_windows: int) -> int:
        """The budget for a paper cut into ``n_windows`` windows."""
        if self.share is None:
            return self.budget
        wanted = max(self.budget, math.ceil(self.share * n_windows))
        return wanted if self.max_budget is None else min(wanted, self.max_budget)


def plan_for(spec: RetrievalSpec | None, settings: RetrievalSettings) -> Plan | None:
    """The retrieval plan for a template under the run's settings; None means read every window."""
    if settings.read == "all":
        return None
    if settings.read == "template" and (spec is None or spec.mode == "all"):
        return None
    template_mode = spec.mode if spec is not None and spec.mode != "all" else "bm25"
    spec = spec or RetrievalSpec()
    sized = {"budget": settings.budget} if settings.budget else {  # a run-wide budget overrides the template's
        "budget": spec.budget, "share": spec.share, "max_budget": spec.max_budget}
    return Plan(mode=settings.mode or template_mode, neighbours=settings.neighbours,
                entity_anchor=settings.entity_anchor, entity_budget=settings.entity_budget, terms=spec.query,
                signals=tuple(spec.signals), diverse=spec.diverse, entity_extra=settings.entity_extra, unit=spec.unit,
                cascade=settings.cascade if settings.cascade.model else None, **sized)


class WindowSelector:
    """Chooses the windows to read per (paper, question); holds the dense encoder when one is used."""

    def __init__(self, settings: RetrievalSettings | None = None) -> None:
        self.settings = settings or RetrievalSettings()
        self._dense: DenseScorer | None = None
        self._anchored: dict[tuple, list[int]] = {}  # (paper, entity, window bounds) -> anchored windows

    def _scores(self, mode: str, question: str, texts: Sequence[str]) -> np.ndarray:
        if mode == "dense":
            if self._dense is None:
                self._dense = DenseScorer(self.settings.dense_model)
            return self._dense(question, texts)
        return bm25_scores(question, texts)

    def scores(self, plan: Plan, question: str, texts: Sequence[str], signal: str) -> np.ndarray:
        """One signal's score per text: BM25 / dense on the question and the template's terms, or a pattern."""
        if signal == "question":
            return self._scores(plan.mode, f"{question} {plan.terms}".strip(), texts)
        return signal_scores(signal, texts)

    def _order(self, plan: Plan, question: str, texts: Sequence[str], signals: Sequence[str]) -> list[int]:
        """Positions of ``texts`` best first: the signals fused by rank, or greedily by new terms if ``diverse``."""
        lists = [self.scores(plan, question, texts, s) for s in signals]
        scores = lists[0] if len(lists) == 1 else reciprocal_rank_fusion(lists)
        term_signals = [s for s in signals if s in TERM_SIGNALS]
        if plan.diverse and term_signals:
            terms = [{f"{s}:{k}": w for s in term_signals for k, w in window_terms(s, t).items()} for t in texts]
            return diverse_order(scores, terms)
        return [int(i) for i in np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")]

    def select(self, doc: Document, windows: Sequence[Window], question: str, plan: Plan | None,
               entity: str | None = None) -> tuple[int, ...] | None:
        """Window indices to read, ascending; None when every window is read (the cache key of a full read)."""
        if plan is None or not windows:
            return None
        anchored = self._anchored_windows(doc, windows, entity) if entity and plan.entity_anchor else []
        if anchored:
            budget = plan.entity_budget or plan.windows_for(len(windows))
            if budget >= len(anchored):
                chosen = set(anchored)
            else:  # the entity is in every one of them: its sub-question's own words rank them
                texts = window_texts(doc, [windows[i] for i in anchored])
                order = self._order(plan, question, texts, ("question",))
                chosen = {anchored[i] for i in order[:budget]}
            extra = plan.entity_extra
        else:
            chosen = set()
            budget = plan.windows_for(len(windows))
            extra = (plan.entity_budget or budget) + plan.entity_extra if entity else budget
        if extra >= len(windows) - len(chosen):  # nothing to rank: every window is read
            return None
        if extra:
            order = self._order(plan, question, window_texts(doc, windows), plan.signals or ("question",))
            chosen.update([i for i in order if i not in chosen][:extra])
        for i in list(chosen):
            chosen.update(j for d in range(1, plan.neighbours + 1) for j in (i - d, i + d) if 0 <= j < len(windows))
        return None if len(chosen) == len(windows) else tuple(sorted(chosen))

    def select_sentences(self, doc: Document, question: str, plan: Plan, pack: Callable[[list], list],
                         n_windows: int, entity: str | None = None) -> tuple[tuple[int, int], ...] | None:
        """Char ranges of the sentences to read, in paper order; None when they would cost every window.

        Sentences are ranked by the plan's signals one after another (the first decides, the next breaks ties;
        sentences naming a bridged entity first) and taken best first while ``pack`` (passages -> the windows
        they fill) stays within the budget. Only sentences with some signal are read; if none has one, the
        question's own words rank them, and if none has those either, every window is read (None).
        """
        sentences = sentence_spans(doc.text)
        texts = [doc.text[a:b] for a, b in sentences]
        keys = [self.scores(plan, question, texts, s) for s in plan.signals]
        if entity and plan.entity_anchor:
            names = entity_names(entity, doc.text)
            keys.insert(0, np.asarray([float(mentions_entity(names, t)) for t in texts]))
        if not any((k > 0).any() for k in keys):
            keys = [bm25_scores(question, texts)]
        useful = np.flatnonzero(np.any([k > 0 for k in keys], axis=0))
        order = useful[np.lexsort(tuple(-k[useful] for k in reversed(keys)))]
        budget = plan.windows_for(n_windows)
        chosen: list[tuple[int, int]] = []
        for i in order:
            if len(pack(chosen + [sentences[i]])) <= budget:
                chosen.append(sentences[i])
        if not chosen or len(pack(chosen)) >= n_windows:
            return None
        return tuple(sorted(chosen))

    def _anchored_windows(self, doc: Document, windows: Sequence[Window], entity: str) -> list[int]:
        key = (doc.sha256, entity, tuple((w.char_start, w.char_end) for w in windows))
        if key not in self._anchored:
            self._anchored[key] = entity_windows(doc, windows, entity)
            if not self._anchored[key]:
                log.debug("%s: %r is not mentioned in any window; scoring all windows", doc.id, entity)
        return self._anchored[key]

    def release(self) -> None:
        self._dense = None
        self._anchored.clear()


def restrict(query: Query, plan: Plan | None, selector: WindowSelector, reader: Reader, doc: Document) -> Query:
    """``query`` limited to the windows (or packed sentences) retrieval picks in ``doc``; as is for a full read.

    Only the reader's tokenizer is needed (no model is loaded)."""
    if plan is None:
        return query
    windows = reader.windows(doc)
    if plan.unit == "sentence":
        passages = selector.select_sentences(doc, query.text, plan, reader.packer(doc, query.text), len(windows),
                                             query.bridge_entity)
        return replace(query, passages=passages)
    return replace(query, windows=selector.select(doc, windows, query.text, plan, query.bridge_entity))
