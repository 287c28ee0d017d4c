"""Long-document extractive QA with SQuAD2-tuned encoders: windows, batching, span decoding, the null score.

transformers 5 has no question-answering pipeline, so this module is ours. A paper is tokenized once per
tokenizer; overlapping windows of it (or windows packed from the sentences retrieval chose) are paired with each
question, read in length-sorted batches, and the start/end logits decoded into spans ranked together across all
windows, with char offsets into the paper.
"""

from __future__ import annotations

import bisect
import logging
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterator, Sequence

import numpy as np

from mlpsych.answers import Span
from mlpsych.documents import Document
from mlpsych.models import free_memory, load_qa_model, load_tokenizer, pick_device, pick_dtype

log = logging.getLogger(__name__)

# Span candidates kept per question while a paper is read (pruned to the best top_k beyond this), so memory
# does not grow with the paper's length; pruning never changes the result (see ``rank_candidates``).
CANDIDATES_KEPT = 2048
# Papers whose tokenization is kept (and so at most read in one call): windows of several papers share batches.
ENCODED_KEPT = 16


@dataclass(frozen=True)
class ReaderSettings:
    """How a paper is windowed and decoded; every field is part of the cache key."""

    stride: int = 128  # tokens shared by consecutive windows (the paper's doc_stride)
    max_length: int | None = None  # window length in tokens; None = the model's maximum
    # Room kept for the question, so windows do not depend on it. A longer question borrows up to stride // 2
    # tokens from the side of the window its neighbour also reads (nothing goes unread), and is cut beyond that.
    question_tokens: int = 24
    n_best: int = 20  # start and end candidates per window
    batch_size: int | None = None  # None: ``Reader.default_batch_size`` for the device and model
    null_threshold: float = 0.0  # for may-be-empty questions: a span must beat the no-answer score by this margin
    device: str = "auto"
    dtype: str = "auto"

    def cache_fields(self) -> dict:
        """Settings that change the result (device and batch size do not, beyond float noise)."""
        return {k: getattr(self, k) for k in ("stride", "max_length", "question_tokens", "n_best", "null_threshold")}


@dataclass(frozen=True)
class Query:
    """One question to read for: the text asked, how many spans to keep and how long they may be."""

    question_id: str
    text: str
    top_k: int
    max_answer_tokens: int
    allow_empty: bool = False
    bridge_entity: str | None = None
    windows: tuple[int, ...] | None = None  # only these windows (retrieval); None = all
    # Or only these char ranges of the paper (retrieval by sentence), packed into windows: see ``pack_passages``.
    passages: tuple[tuple[int, int], ...] | None = None


@dataclass
class Window:
    """A run of document tokens ``[token_start, token_end)`` covering ``[char_start, char_end)``, or, for a window
    packed from passages, the token ranges ``pieces`` within those bounds, read one after the other."""

    index: int
    token_start: int
    token_end: int
    char_start: int
    char_end: int
    pieces: tuple[tuple[int, int], ...] = ()

    @property
    def token_ranges(self) -> tuple[tuple[int, int], ...]:
        return self.pieces or ((self.token_start, self.token_end),)


@dataclass
class EncodedDocument:
    """A paper tokenized once: token ids and their char offsets, and its windows."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    windows: list[Window] = field(default_factory=list)

    @cached_property
    def starts(self) -> list[int]:
        """Each token's first char: where a passage's tokens are looked up (many times while packing)."""
        return [a for a, _ in self.offsets]


@dataclass
class _PairTemplate:
    """Where a tokenizer puts its special tokens around (question, context): learnt by probing it once."""

    prefix: list[int]
    middle: list[int]
    suffix: list[int]
    type_prefix: list[int]
    type_middle: list[int]
    type_suffix: list[int]
    question_type: int
    context_type: int
    uses_token_types: bool

    @property
    def special_count(self) -> int:
        return len(self.prefix) + len(self.middle) + len(self.suffix)


def _learn_pair_template(tokenizer) -> _PairTemplate:
    probe = tokenizer("who", "there", return_token_type_ids=True)
    ids = probe["input_ids"]
    seq = probe.sequence_ids()
    types = probe.get("token_type_ids") or [0] * len(ids)
    q_pos = [i for i, s in enumerate(seq) if s == 0]
    c_pos = [i for i, s in enumerate(seq) if s == 1]
    return _PairTemplate(
        prefix=ids[: q_pos[0]],
        middle=ids[q_pos[-1] + 1 : c_pos[0]],
        suffix=ids[c_pos[-1] + 1 :],
        type_prefix=types[: q_pos[0]],
        type_middle=types[q_pos[-1] + 1 : c_pos[0]],
        type_suffix=types[c_pos[-1] + 1 :],
        question_type=types[q_pos[0]],
        context_type=types[c_pos[0]],
        uses_token_types="token_type_ids" in probe,
    )


def _max_positions(model_id: str) -> int:
    """The model's position limit from its config (read without loading weights)."""
    from transformers import AutoConfig

    try:
        return int(getattr(AutoConfig.from_pretrained(model_id), "max_position_embeddings", 512) or 512)
    except (OSError, ValueError):
        return 512


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - (m + math.log(np.exp(x - m).sum()))


@dataclass
class WindowCandidate:
    """A span found in one window, before spans of all windows are ranked together."""

    char_start: int
    char_end: int
    score: float  # probability as a QA pipeline reports it: p(start) * p(end) within the window
    null_score: float  # p(no answer) in that window
    window: int


def decode_window(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_mask: np.ndarray,
    offsets: Sequence[tuple[int, int]],
    *,
    n_best: int,
    max_answer_tokens: int,
    null_index: int = 0,
    window: int = 0,
    pieces: np.ndarray | None = None,
) -> tuple[list[WindowCandidate], float]:
    """SQuAD2 decoding of one window: top-n starts x top-n ends, inside the context, end >= start, length-bounded.

    Scores are normalized over the window (context tokens plus the no-answer position), so spans of different
    windows compare as the paper's pipeline compared them. In a window packed from passages, ``pieces`` gives
    each position's passage: a span must start and end in the same one (the text between two is not read).
    Returns the candidates and the window's null score.
    """
    allowed = context_mask.astype(bool).copy()
    allowed[null_index] = True
    start = np.where(allowed, start_logits, -np.inf)
    end = np.where(allowed, end_logits, -np.inf)
    log_start = _log_softmax(start)
    log_end = _log_softmax(end)
    null_score = float(math.exp(log_start[null_index] + log_end[null_index]))
    ctx_idx = np.flatnonzero(context_mask)
    if ctx_idx.size == 0:
        return [], null_score
    k = min(n_best, ctx_idx.size)
    top_starts = ctx_idx[np.argsort(-log_start[ctx_idx], kind="stable")[:k]]
    top_ends = ctx_idx[np.argsort(-log_end[ctx_idx], kind="stable")[:k]]
    candidates = []
    for s in top_starts:
        for e in top_ends:
            if e < s or e - s + 1 > max_answer_tokens or (pieces is not None and pieces[s] != pieces[e]):
                continue
            char_start, char_end = offsets[s][0], offsets[e][1]
            if char_end <= char_start:
                continue
            score = float(math.exp(log_start[s] + log_end[e]))
            candidates.append(WindowCandidate(char_start, char_end, score, null_score, window))
    return candidates, null_score


def rank_candidates(
    candidates: list[WindowCandidate],
    null_scores: list[float],
    *,
    top_k: int,
    allow_empty: bool,
    null_threshold: float = 0.0,
) -> list[WindowCandidate]:
    """Spans of all windows ranked together; a span read in two overlapping windows counts once (best score).

    For a question that may have no answer, the no-answer option competes as in SQuAD2: its score is the
    lowest null score over the windows, and only spans above it (plus ``null_threshold``) are kept.
    """
    best: dict[tuple[int, int], WindowCandidate] = {}
    for c in candidates:
        key = (c.char_start, c.char_end)
        if key not in best or c.score > best[key].score:
            best[key] = c
    ranked = sorted(best.values(), key=lambda c: (-c.score, c.char_start, c.char_end))
    if allow_empty and null_scores:
        floor = min(null_scores) + null_threshold
        ranked = [c for c in ranked if c.score > floor]
    return ranked[:top_k]


def _step(size: int, stride: int) -> int:
    """Tokens between the starts of consecutive parts of ``size`` tokens that share ``stride`` tokens."""
    if stride >= size:
        raise ValueError(f"stride ({stride}) must be smaller than the window's context ({size} tokens)")
    return size - stride


def _cut(first: int, last: int, size: int, step: int) -> Iterator[tuple[int, int]]:
    """Tokens ``[first, last)`` in parts of at most ``size`` tokens, each starting ``step`` after the previous."""
    while True:
        end = min(first + size, last)
        yield first, end
        if end >= last:
            return
        first += step


def make_windows(offsets: Sequence[tuple[int, int]], context_tokens: int, stride: int) -> list[Window]:
    """Overlapping windows of ``context_tokens`` tokens; consecutive windows share ``stride`` tokens."""
    if not offsets:
        return []
    step = _step(context_tokens, stride)
    return [Window(i, start, end, offsets[start][0], offsets[end - 1][1])
            for i, (start, end) in enumerate(_cut(0, len(offsets), context_tokens, step))]


def pack_passages(offsets: Sequence[tuple[int, int]], passages: Sequence[tuple[int, int]], capacity: int,
                  stride: int, starts: Sequence[int] | None = None) -> list[Window]:
    """Windows holding the tokens of the given char ranges, in paper order, at most ``capacity`` tokens each.

    Retrieval by sentence reads a paper's best sentences, not its best windows: the sentences naming methods are
    spread over the paper, and whole windows around them are mostly other text. Touching or overlapping ranges
    become one piece; a piece is never split between windows unless it is longer than a window, when it is cut
    like a paper (consecutive parts share ``stride`` tokens). ``starts``: the tokens' first chars, if known.
    """
    step = _step(capacity, stride)
    starts = starts if starts is not None else [a for a, _ in offsets]
    merged: list[list[int]] = []
    for a, b in sorted(passages):
        first, last = bisect.bisect_left(starts, a), bisect.bisect_left(starts, b)
        if last <= first:
            continue
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    pieces = [piece for first, last in merged for piece in _cut(first, last, capacity, step)]
    packed: list[list[tuple[int, int]]] = []
    used = capacity
    for piece in pieces:
        if used + piece[1] - piece[0] > capacity:
            packed.append([])
            used = 0
        packed[-1].append(piece)
        used += piece[1] - piece[0]
    return [Window(i, p[0][0], p[-1][1], offsets[p[0][0]][0], offsets[p[-1][1] - 1][1], tuple(p))
            for i, p in enumerate(packed)]


class Reader:
    """An extractive QA model reading whole papers. Configure in ``__init__``, load in ``warm_up``, read with ``run``."""

    def __init__(self, model: str, settings: ReaderSettings | None = None) -> None:
        self.model_id = model
        self.settings = settings or ReaderSettings()
        self.model = None
        self.tokenizer = None
        self.device = None
        self._template: _PairTemplate | None = None
        self._max_positions = 512
        self._batch_size = self.settings.batch_size or 0  # chosen at warm-up if not set; halved on CUDA OOM
        self._encoded: dict[str, EncodedDocument] = {}
        self.windows_read = 0  # counted for benchmarks and tests

    def load_tokenizer(self) -> None:
        """The tokenizer alone: enough to window papers (and so to retrieve) before the model is needed."""
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.model_id)
            self._template = _learn_pair_template(self.tokenizer)
            self._max_positions = _max_positions(self.model_id)

    def warm_up(self) -> None:
        self.load_tokenizer()
        if self.model is not None:
            return
        self.device = pick_device(self.settings.device)
        dtype = pick_dtype(self.settings.dtype, self.device)
        self.model = load_qa_model(self.model_id, self.device, dtype)
        config = self.model.config
        self._batch_size = self._batch_size or self.default_batch_size(self.device, config.model_type,
                                                                       getattr(config, "hidden_size", 0))

    @staticmethod
    def default_batch_size(device: str, model_type: str, hidden_size: int) -> int:
        """Windows per forward pass when the settings leave it open. 8 fills a GPU (halved on out-of-memory).
        On a CPU a base or large DeBERTa reads one window at a time: its relative-position tensors grow with the
        batch and spill the caches (benchmarks/README.md, reader_vs_reference: large 1.04x the reference at 1,
        0.89x at 8; base 1.25x faster at 1 than at 8), while ELECTRA-large was faster at 8 (1.27x vs 1.16x)."""
        if str(device).startswith("cpu") and model_type in ("deberta", "deberta-v2") and hidden_size >= 768:
            return 1
        return 8

    def release(self) -> None:
        self.model = None
        self.tokenizer = None
        self._encoded.clear()
        free_memory()

    @property
    def max_length(self) -> int:
        if self.settings.max_length:
            return self.settings.max_length
        limits = [self._max_positions, self.tokenizer.model_max_length]
        return int(min(x for x in limits if x and x > 0 and x < 100_000))

    @property
    def context_tokens(self) -> int:
        return self.max_length - self._template.special_count - self.settings.question_tokens

    def encode(self, doc: Document) -> EncodedDocument:
        """Tokenize a paper once (reused by every question asked of it) and cut it into windows."""
        key = doc.sha256
        if key not in self._encoded:
            self.load_tokenizer()
            enc = self.tokenizer(doc.text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
            offsets = [self._strip_offset(doc.text, o) for o in enc["offset_mapping"]]
            keep = [i for i, (a, b) in enumerate(offsets) if b > a]
            ids = [enc["input_ids"][i] for i in keep]
            offsets = [offsets[i] for i in keep]
            encoded = EncodedDocument(ids, offsets)
            encoded.windows = make_windows(offsets, self.context_tokens, self.settings.stride)
            self._encoded[key] = encoded
            while len(self._encoded) > ENCODED_KEPT:  # papers of one batch group at most: memory stays bounded
                self._encoded.pop(next(iter(self._encoded)))
        return self._encoded[key]

    @staticmethod
    def _strip_offset(text: str, offset: tuple[int, int]) -> tuple[int, int]:
        a, b = offset
        while a < b and text[a].isspace():
            a += 1
        return a, b

    def windows(self, doc: Document) -> list[Window]:
        return self.encode(doc).windows

    def packed_windows(self, doc: Document, passages: Sequence[tuple[int, int]], question: str = "") -> list[Window]:
        """The windows that reading ``passages`` of ``doc`` for ``question`` costs (see ``pack_passages``)."""
        return self.packer(doc, question)(passages)

    def packer(self, doc: Document, question: str = "") -> Callable[[Sequence[tuple[int, int]]], list[Window]]:
        """``packed_windows`` for one paper and question, for callers that try many sets of passages."""
        self.load_tokenizer()
        encoded = self.encode(doc)
        extra = max(0, len(self._question_ids(question)) - self.settings.question_tokens) if question else 0
        capacity = self.context_tokens - extra
        return lambda passages: pack_passages(encoded.offsets, passages, capacity, self.settings.stride,
                                              encoded.starts)

    def _question_ids(self, text: str) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        limit = self.settings.question_tokens + self.settings.stride // 2
        if len(ids) > limit:
            log.debug("question cut to %d tokens: %r", limit, text)
        return ids[:limit]

    def _context(self, window: Window, n_windows: int, q_len: int) -> tuple[tuple[int, int], ...]:
        """Token ranges of ``window`` read with a question of ``q_len`` tokens: a question longer than its room
        takes the extra tokens from the window's end (its start for the last window), which the neighbour also
        reads. Packed windows were packed for their question's length and are read whole."""
        extra = max(0, q_len - self.settings.question_tokens)
        if extra == 0 or window.pieces:
            return window.token_ranges
        if window.index == n_windows - 1 and n_windows > 1:
            return ((window.token_start + extra, window.token_end),)
        return ((window.token_start, max(window.token_start + 1, window.token_end - extra)),)

    def _features(self, papers: Sequence[tuple[Document, Sequence[Query]]]):
        """(job, window, question ids, context token ranges read, length) per feature, job = (paper index, query
        index): cheap, built for all the papers of a call at once."""
        plan = []
        for pi, (doc, queries) in enumerate(papers):
            encoded = self.encode(doc)
            for qi, query in enumerate(queries):
                q_ids = self._question_ids(query.text)
                if query.passages is not None:
                    chosen = self.packed_windows(doc, query.passages, query.text)
                elif query.windows is not None:
                    chosen = [encoded.windows[i] for i in query.windows]
                else:
                    chosen = encoded.windows
                for window in chosen:
                    context = self._context(window, len(encoded.windows), len(q_ids))
                    length = self._template.special_count + len(q_ids) + sum(b - a for a, b in context)
                    plan.append(((pi, qi), window, q_ids, context, length))
        return plan

    def _build(self, encoded: EncodedDocument, job: tuple[int, int], window: Window, q_ids: list[int],
               context: tuple[tuple[int, int], ...]):
        """Model inputs of one feature, built only when its batch is read (windows in flight stay bounded)."""
        t = self._template
        ctx = [token for a, b in context for token in encoded.ids[a:b]]
        ids = t.prefix + q_ids + t.middle + ctx + t.suffix
        ctx_offset = len(t.prefix) + len(q_ids) + len(t.middle)
        types = t.type_prefix + [t.question_type] * len(q_ids) + t.type_middle + [t.context_type] * len(ctx) + t.type_suffix
        return (job, window, ids, types, ctx_offset, context)

    def run(self, doc: Document, queries: Sequence[Query]) -> dict[int, list[Span]]:
        """Read ``doc`` for each query; returns spans per query index, best first."""
        return self.run_many([(doc, queries)])[0]

    def run_many(self, papers: Sequence[tuple[Document, Sequence[Query]]]) -> list[dict[int, list[Span]]]:
        """Read several papers, each for its queries, with their windows batched together (sorted by length,
        so short last windows and short questions share batches); spans per paper and query index."""
        import torch

        self.warm_up()
        if len(papers) > ENCODED_KEPT:
            raise ValueError(f"read at most {ENCODED_KEPT} papers per call (got {len(papers)})")
        features = self._features(papers)
        encoded = [self.encode(doc) for doc, _ in papers]
        jobs = [(pi, qi) for pi, (_, queries) in enumerate(papers) for qi in range(len(queries))]
        candidates: dict[tuple[int, int], list[WindowCandidate]] = {job: [] for job in jobs}
        nulls: dict[tuple[int, int], list[float]] = {job: [] for job in jobs}
        order = sorted(range(len(features)), key=lambda i: features[i][4])
        position = 0
        while position < len(order):
            batch = [self._build(encoded[features[i][0][0]], *features[i][:4])
                     for i in order[position : position + self._batch_size]]
            try:
                starts, ends = self._forward(batch)
            except torch.cuda.OutOfMemoryError:
                if self._batch_size == 1:
                    raise
                self._batch_size = max(1, self._batch_size // 2)
                log.warning("%s: CUDA out of memory; batch size halved to %d and retried", self.model_id, self._batch_size)
                torch.cuda.empty_cache()
                continue
            position += len(batch)
            self.windows_read += len(batch)
            for row, ((pi, qi), window, ids, _, ctx_offset, context) in enumerate(batch):
                length = len(ids)
                mask = np.zeros(length, dtype=bool)
                offsets = [(0, 0)] * ctx_offset
                pieces = np.full(length, -1) if len(context) > 1 else None
                for piece, (a, b) in enumerate(context):
                    if pieces is not None:
                        pieces[len(offsets) : len(offsets) + b - a] = piece
                    offsets += encoded[pi].offsets[a:b]
                mask[ctx_offset : len(offsets)] = True
                offsets += [(0, 0)] * (length - len(offsets))
                found, null = decode_window(
                    starts[row, :length], ends[row, :length], mask, offsets, n_best=self.settings.n_best,
                    max_answer_tokens=papers[pi][1][qi].max_answer_tokens, window=window.index, pieces=pieces,
                )
                candidates[(pi, qi)].extend(found)
                nulls[(pi, qi)].append(null)
            for job in {feature[0] for feature in batch}:
                if len(candidates[job]) > CANDIDATES_KEPT:  # only the best top_k spans can win: prune as we go
                    top_k = papers[job[0]][1][job[1]].top_k
                    candidates[job] = rank_candidates(candidates[job], [], top_k=top_k, allow_empty=False)
        results: list[dict[int, list[Span]]] = [{} for _ in papers]
        for pi, qi in jobs:
            doc, query = papers[pi][0], papers[pi][1][qi]
            ranked = rank_candidates(
                candidates[(pi, qi)], nulls[(pi, qi)], top_k=query.top_k, allow_empty=query.allow_empty,
                null_threshold=self.settings.null_threshold,
            )
            results[pi][qi] = [self._to_span(doc, query, c) for c in ranked]
        return results

    def _forward(self, batch) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits for a batch of (question, window) features, padded to the longest."""
        import torch

        pad_id = self.tokenizer.pad_token_id or 0
        width = max(len(f[2]) for f in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        token_types = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (_, _, ids, types, *_) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
            token_types[row, : len(ids)] = torch.tensor(types)
        inputs = {"input_ids": input_ids, "attention_mask": attention}
        if self._template.uses_token_types:
            inputs["token_type_ids"] = token_types
        with torch.inference_mode():
            out = self.model(**{k: v.to(self.device) for k, v in inputs.items()})
        return out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()

    def _to_span(self, doc: Document, query: Query, c: WindowCandidate) -> Span:
        return Span(
            doc_id=doc.id,
            question_id=query.question_id,
            model=self.model_id,
            text=doc.text[c.char_start : c.char_end],
            start=c.char_start,
            end=c.char_end,
            score=c.score,
            null_score=c.null_score,
            page=doc.page_at(c.char_start),
            evidence=doc.sentence_around(c.char_start, c.char_end),
            bridge_entity=query.bridge_entity,
        )
