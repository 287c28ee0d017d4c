"""Long-document extractive QA with SQuAD2-tuned encoders: the reader that pairs windows with questions and batches.

transformers 5 has no question-answering pipeline, so this module is ours. A paper is tokenized once per
tokenizer; its windows (``windows``) are paired with each question, read in length-sorted batches, and the
start/end logits decoded (``decode``) into spans ranked together across all windows, with char offsets into the
paper.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlpsych.answers import Span
from mlpsych.documents import Document
from mlpsych.models import NO_REMOTE_CODE, free_memory, halving_on_oom, load_qa_model, load_tokenizer, pick_device, pick_dtype
from mlpsych.reading.checkpoint import Call, Checkpoints, ReadState, Schedule
from mlpsych.reading.decode import (
    WindowCandidate,
    add_summed,
    decode_window,
    decode_window_exhaustive,
    decode_window_pipeline,
    rank_candidates,
    window_candidates,
)
from mlpsych.reading.windows import EncodedDocument, Window, make_windows, pack_passages
from mlpsych.settings import ReaderSettings

log = logging.getLogger(__name__)

# Span candidates kept per question while a paper is read (pruned to the best top_k beyond this, or, where same
# texts are summed, summed into one record per text), so memory does not grow with the paper's length; pruning
# never changes the result.
CANDIDATES_KEPT = 2048
# Papers whose tokenization is kept (and so at most read in one call): windows of several papers share batches.
ENCODED_KEPT = 16


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
    # What chose ``windows`` when it was not the paper's text alone (a cascade's small reader): part of cache keys.
    selected_by: str | None = None


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


def _word_tokens(word_ids: Sequence[int | None]) -> np.ndarray:
    """Each token's word as the indices of the word's first and last token, an ``(n, 2)`` array; a token outside
    any word is alone."""
    words = np.array([-1 if w is None else w for w in word_ids], dtype=np.int64)
    first, last = np.arange(len(words)), np.arange(len(words))
    inside = np.flatnonzero(words >= 0)
    if inside.size:
        known, first_at = np.unique(words[inside], return_index=True)
        last_at = inside.size - 1 - np.unique(words[inside][::-1], return_index=True)[1]
        which = np.searchsorted(known, words[inside])
        first[inside], last[inside] = inside[first_at[which]], inside[last_at[which]]
    return np.stack([first, last], axis=1)


def _max_positions(model_id: str) -> int:
    """The model's position limit from its config (read without loading weights)."""
    from transformers import AutoConfig

    try:
        return int(getattr(AutoConfig.from_pretrained(model_id, **NO_REMOTE_CODE), "max_position_embeddings", 512) or 512)
    except (OSError, ValueError):
        return 512


@dataclass(frozen=True)
class _Feature:
    """One window of one paper paired with one of its queries: what is read, and how long its input is."""

    paper: int  # index of the paper in the call
    query: int  # index of the query among that paper's
    window: Window
    question_ids: list[int]
    context: tuple[tuple[int, int], ...]  # token ranges of the paper read in this window
    length: int  # tokens of the model input

    @property
    def job(self) -> tuple[int, int]:
        return self.paper, self.query


@dataclass(frozen=True)
class _Inputs:
    """A feature's model input: token ids, token types, and where the context starts in them."""

    feature: _Feature
    ids: list[int]
    types: list[int]
    context_offset: int


def context_layout(context_offset: int, context: Sequence[tuple[int, int]],
                   paper_offsets: np.ndarray | Sequence[tuple[int, int]], length: int,
                   word_tokens: np.ndarray | Sequence[tuple[int, int]] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """For one model input of ``length`` tokens: which positions are the paper's (mask), each position's char
    offsets in the paper (a ``(length, 2)`` array; ``(0, 0)`` outside the context), and, for a window packed from
    several passages, each position's passage (-1 elsewhere; None for one passage), so a span never joins two
    passages. Built with array lookups: this runs for every window read.

    With ``word_tokens`` (each token's word as its first and last token) a position's offsets are its whole word's
    (a span then starts and ends on word bounds, as the transformers pipeline's ``align_to_words``), limited to the
    word's tokens inside the passage, as the pipeline sees a word that a window boundary cuts."""
    paper_offsets = np.asarray(paper_offsets, dtype=np.int64).reshape(-1, 2)
    words = None if word_tokens is None else np.asarray(word_tokens, dtype=np.int64).reshape(-1, 2)
    mask = np.zeros(length, dtype=bool)
    offsets = np.zeros((length, 2), dtype=np.int64)
    pieces = np.full(length, -1) if len(context) > 1 else None
    position = context_offset
    for piece, (a, b) in enumerate(context):
        here = slice(position, position + b - a)
        if pieces is not None:
            pieces[here] = piece
        if words is None:
            offsets[here] = paper_offsets[a:b]
        else:
            offsets[here, 0] = paper_offsets[np.maximum(words[a:b, 0], a), 0]
            offsets[here, 1] = paper_offsets[np.minimum(words[a:b, 1], b - 1), 1]
        position += b - a
    mask[context_offset:position] = True
    return mask, offsets, pieces


class Reader:
    """An extractive QA model reading whole papers. Configure in ``__init__``, load in ``warm_up``, read with ``run``."""

    def __init__(self, model: str, settings: ReaderSettings | None = None, cache_dir: Path | None = None) -> None:
        self.model_id = model
        self.settings = settings or ReaderSettings()
        self.cache_dir = cache_dir  # the run's cache folder (--cache), where an ONNX export is kept; None: the default
        self.model = None
        self.tokenizer = None
        self.device = None
        self._template: _PairTemplate | None = None
        self._max_positions = 512
        self._batch_size = self.settings.batch_size or 0  # chosen at warm-up if not set; halved on CUDA OOM
        self._encoded: dict[str, EncodedDocument] = {}
        self._questions_cut: set[str] = set()  # said once each, not once per paper
        self.windows_read = 0  # counted for benchmarks and tests
        self.tokens_read = 0  # model input tokens (no padding): what reading cost (mlpsych.reading.cost)
        # Called after each batch with (windows read, windows to read) of the current call: a book-length paper is
        # one call of many minutes, and a front end's progress would otherwise stand still through it.
        self.on_batch: Callable[[int, int], None] | None = None
        # Where a call's state is saved between batches and found again (mlpsych.reading.checkpoint); None: not saved.
        self.checkpoints: Checkpoints | None = None

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
        if self.settings.runtime == "onnxruntime":
            from mlpsych.onnx_runtime import load_onnx_qa_model, onnx_dtype

            self.device = "cpu"
            self.model = load_onnx_qa_model(self.model_id, onnx_dtype(self.settings.dtype, self.settings.device),
                                            self._template.uses_token_types, self.cache_dir)
        else:
            self.device = pick_device(self.settings.device)
            self.model = load_qa_model(self.model_id, self.device, pick_dtype(self.settings.dtype, self.device,
                                                                              int8=True))
        config = self.model.config
        self._batch_size = self._batch_size or self.default_batch_size(self.device, config.model_type,
                                                                       getattr(config, "hidden_size", 0))

    @staticmethod
    def default_batch_size(device: str, model_type: str, hidden_size: int) -> int:
        """Windows per forward pass when the settings leave it open (halved on out-of-memory). On a CUDA GPU 32:
        the default and fast presets read 1.13-1.26x faster than at 8 on an H100 and an H200 (benchmarks/README.md,
        presets_per_hour). On a CPU a base or large DeBERTa reads one window at a time: its relative-position
        tensors grow with the batch and spill the caches (reader_vs_reference: large 1.04x the reference at 1,
        0.89x at 8; base 1.25x faster at 1 than at 8), while ELECTRA-large was faster at 8 (1.27x vs 1.16x)."""
        if str(device).startswith("cuda"):
            return 32
        if str(device).startswith("cpu") and model_type in ("deberta", "deberta-v2") and hidden_size >= 768:
            return 1
        return 8

    def unload(self) -> None:
        """Free the model, keeping the tokenizer and the papers already tokenized for the run's next stage."""
        if self.model is None:  # nothing of this reader to free; the run's end collects once (ModelPool.release)
            return
        released = weakref.ref(self.model)
        self.model = None
        free_memory(released)

    def release(self) -> None:
        self.unload()
        self.tokenizer = None
        self._encoded.clear()

    @property
    def max_length(self) -> int:
        """Tokens per model input: the settings' length within what the model takes (as the pipeline's
        ``min(model_max_length, max_seq_len)``), else the model's maximum."""
        limits = [self._max_positions, self.tokenizer.model_max_length, self.settings.max_length]
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
            ids, offsets = enc["input_ids"], [tuple(o) for o in enc["offset_mapping"]]
            keep = list(range(len(offsets)))
            if not self.settings.keep_blank_tokens:
                offsets = [self._strip_offset(doc.text, o) for o in offsets]
                keep = [i for i, (a, b) in enumerate(offsets) if b > a]
            word_ids = enc.word_ids() if self.settings.snap_to_words else None
            words = _word_tokens([word_ids[i] for i in keep]) if word_ids is not None else None
            encoded = EncodedDocument([ids[i] for i in keep], [offsets[i] for i in keep],
                                      word_tokens=words)
            encoded.windows = make_windows(encoded.offsets, self.context_tokens, self.settings.stride)
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

    def _question_ids(self, text: str, whole: bool = False) -> list[int]:
        """The question's tokens: whole when its windows are laid out around it (``per_question``), else cut to
        the room shared windows keep for it plus what it may borrow."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if whole:
            return ids[: self.max_length - self._template.special_count - self.settings.stride - 1]
        limit = self.settings.question_tokens + self.settings.stride // 2
        if len(ids) > limit and text not in self._questions_cut:
            self._questions_cut.add(text)  # a researcher's own long question, read without its end: said
            log.warning("question read cut to its first %d of %d tokens (the rest is not read: shorten it): %r",
                        limit, len(ids), text)
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

    def _features(self, papers: Sequence[tuple[Document, Sequence[Query]]]) -> list[_Feature]:
        """Every (query, window) pair of the papers of one call: cheap, built for all of them at once."""
        plan = []
        for pi, (doc, queries) in enumerate(papers):
            encoded = self.encode(doc)
            for qi, query in enumerate(queries):
                # A full read lays its windows out around the question (per_question); a read retrieval restricted
                # uses the shared windows it chose from.
                around = self.settings.layout == "per_question" and query.passages is None and query.windows is None
                q_ids = self._question_ids(query.text, whole=around)
                if query.passages is not None:
                    chosen = self.packed_windows(doc, query.passages, query.text)
                elif query.windows is not None:
                    chosen = [encoded.windows[i] for i in query.windows]
                elif around:
                    size = self.max_length - self._template.special_count - len(q_ids)
                    chosen = encoded.windows_for(size, self.settings.stride)
                else:
                    chosen = encoded.windows
                for window in chosen:
                    context = window.token_ranges if around else self._context(window, len(encoded.windows), len(q_ids))
                    length = self._template.special_count + len(q_ids) + sum(b - a for a, b in context)
                    plan.append(_Feature(pi, qi, window, q_ids, context, length))
        return plan

    def _build(self, encoded: EncodedDocument, feature: _Feature) -> _Inputs:
        """Model inputs of one feature, built only when its batch is read (windows in flight stay bounded)."""
        t = self._template
        ctx = [token for a, b in feature.context for token in encoded.ids[a:b]]
        q_ids = feature.question_ids
        ids = t.prefix + q_ids + t.middle + ctx + t.suffix
        types = (t.type_prefix + [t.question_type] * len(q_ids) + t.type_middle + [t.context_type] * len(ctx)
                 + t.type_suffix)
        return _Inputs(feature, ids, types, len(t.prefix) + len(q_ids) + len(t.middle))

    def run(self, doc: Document, queries: Sequence[Query]) -> dict[int, list[Span]]:
        """Read ``doc`` for each query; returns spans per query index, best first."""
        return self.run_many([(doc, queries)])[0]

    def run_many(self, papers: Sequence[tuple[Document, Sequence[Query]]]) -> list[dict[int, list[Span]]]:
        """Read several papers, each for its queries, with their windows batched together (sorted by length,
        so short last windows and short questions share batches); spans per paper and query index."""
        self.warm_up()
        if len(papers) > ENCODED_KEPT:
            raise ValueError(f"read at most {ENCODED_KEPT} papers per call (got {len(papers)})")
        features = sorted(self._features(papers), key=lambda f: f.length)
        encoded = [self.encode(doc) for doc, _ in papers]
        pairs = [(pi, qi) for pi, (_, queries) in enumerate(papers) for qi in range(len(queries))]
        jobs = {job: n for n, job in enumerate(pairs)}  # (paper, query) -> its place in the call's state
        state = self._resumed(papers, len(jobs), len(features))
        candidates, nulls, sums = state.candidates, state.nulls, state.sums  # per job; sums where texts are summed
        schedule = Schedule()
        while state.position < len(features):
            (batch, starts, ends), self._batch_size = halving_on_oom(
                functools.partial(self._read_batch, encoded, features, state.position), self._batch_size,
                f"{self.model_id}: batch size")
            state.position += len(batch)
            state.batch_size = self._batch_size
            self.windows_read += len(batch)
            if self.on_batch is not None:
                self.on_batch(state.position, len(features))
            self.tokens_read += sum(len(inputs.ids) for inputs in batch)
            for row, inputs in enumerate(batch):
                feature = inputs.feature
                query = papers[feature.paper][1][feature.query]
                length = len(inputs.ids)
                paper = encoded[feature.paper]
                mask, offsets, pieces = context_layout(inputs.context_offset, feature.context, paper.offset_table,
                                                       length, paper.word_tokens)
                found, null = self._decode(starts[row, :length], ends[row, :length], mask, offsets, query,
                                           feature.window.index, pieces)
                candidates[jobs[feature.job]].extend(found)
                nulls[jobs[feature.job]].append(null)
            for (pi, qi), job in {inputs.feature.job: jobs[inputs.feature.job] for inputs in batch}.items():
                if len(candidates[job]) + len(sums[job]) > CANDIDATES_KEPT:  # only the best top_k can win: prune
                    candidates[job] = self._pruned(candidates[job], sums[job], papers[pi][0], papers[pi][1][qi].top_k)
            if self.checkpoints is not None and state.position < len(features) and schedule.due():
                schedule.save(self.checkpoints.save, papers, state)
        results: list[dict[int, list[Span]]] = [{} for _ in papers]
        for (pi, qi), job in jobs.items():
            doc, query = papers[pi][0], papers[pi][1][qi]
            found = candidates[job]
            if self.settings.same_text == "summed":
                found = list(add_summed(sums[job], found, doc.text).values())
            ranked = rank_candidates(
                found, nulls[job], top_k=query.top_k, allow_empty=query.allow_empty,
                null_threshold=self.settings.null_threshold, dedupe=self.settings.dedupe,
            )
            results[pi][qi] = [self._to_span(doc, query, c) for c in ranked]
        return results

    def _resumed(self, papers: Call, queries: int, features: int) -> ReadState:
        """Where a call starts: where an interrupted call of the same papers and queries was saved, if it read in
        the batches and on the device this one would, else at its start."""
        fresh = ReadState.start(queries, self._batch_size, str(self.device))
        saved = self.checkpoints.load(papers) if self.checkpoints is not None else None
        if saved is None:
            return fresh
        if not saved.resumes(fresh):
            log.info("%s: a read interrupted after %d of %d windows is read again from the start: it read %d "
                     "windows a batch on %s, this one %d on %s", self.model_id, saved.position, features,
                     saved.batch_size, saved.device, fresh.batch_size, fresh.device)
            return fresh
        log.info("%s: resuming a read interrupted after %d of %d windows", self.model_id, saved.position, features)
        return saved

    def _pruned(self, found: list[WindowCandidate], sums: dict[str, WindowCandidate], doc: Document,
                top_k: int) -> list[WindowCandidate]:
        """A question's candidates read since the last pruning, fewer and with the same result: the best ``top_k``,
        or, where same texts are summed (a span's final score depends on every window), none: they are summed into
        the question's one record per text, ``sums``."""
        if self.settings.same_text == "summed":
            add_summed(sums, found, doc.text)
            return []
        return rank_candidates(found, [], top_k=top_k, allow_empty=False, dedupe=self.settings.dedupe)

    def _decode(self, starts: np.ndarray, ends: np.ndarray, mask: np.ndarray, offsets: np.ndarray,
                query: Query, window: int, pieces: np.ndarray | None) -> tuple[list[WindowCandidate], float]:
        """One window's spans by the settings' search: n-best starts x ends, or every pair as the pipeline (in its
        float32 arithmetic and selection where the search is ``pipeline``)."""
        if self.settings.search in ("exhaustive", "pipeline"):
            top_k = window_candidates(query.top_k, self.settings.same_text, self.settings.snap_to_words)
            search = decode_window_pipeline if self.settings.search == "pipeline" else decode_window_exhaustive
            return search(starts, ends, mask, offsets, top_k=top_k, max_answer_tokens=query.max_answer_tokens,
                          window=window, pieces=pieces)
        return decode_window(starts, ends, mask, offsets, n_best=self.settings.n_best,
                             max_answer_tokens=query.max_answer_tokens, window=window, pieces=pieces)

    def _read_batch(self, encoded: list[EncodedDocument], features: list[_Feature], position: int,
                    size: int) -> tuple[list[_Inputs], np.ndarray, np.ndarray]:
        """The ``size`` features from ``position`` on, built and read: their inputs and start and end logits."""
        batch = [self._build(encoded[f.paper], f) for f in features[position : position + size]]
        return (batch, *self._forward(batch))

    def _forward(self, batch: list[_Inputs]) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits for a batch of (question, window) features, padded to the longest."""
        import torch

        pad_id = self.tokenizer.pad_token_id or 0
        width = max(len(inputs.ids) for inputs in batch)
        # filled in numpy and handed over once (two torch.tensor calls a row were 4% of a fast run on an H100)
        input_ids = np.full((len(batch), width), pad_id, dtype=np.int64)
        attention = np.zeros((len(batch), width), dtype=np.int64)
        token_types = np.zeros((len(batch), width), dtype=np.int64)
        for row, inputs in enumerate(batch):
            input_ids[row, : len(inputs.ids)] = inputs.ids
            attention[row, : len(inputs.ids)] = 1
            token_types[row, : len(inputs.ids)] = inputs.types
        arrays = {"input_ids": input_ids, "attention_mask": attention}
        if self._template.uses_token_types:
            arrays["token_type_ids"] = token_types
        with torch.inference_mode():
            out = self.model(**{k: torch.from_numpy(v).to(self.device) for k, v in arrays.items()})
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
