"""What a run returns, and how one paper's failure becomes its status instead of ending the run."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from mlpsych.answers import Answer
from mlpsych.documents import Document
from mlpsych.errors import CacheError, ModelLoadError, NormalizerUnavailable, one_line
from mlpsych.questions import QuestionSet

log = logging.getLogger(__name__)


@dataclass
class RunInfo:
    """The run's facts for the *run* sheet and the front ends: versions, settings, timing, cache use, work done."""

    # Noted by the stages while running (first in the run sheet, where they were in its dict before RunInfo).
    warnings: list[str] = field(default_factory=list)  # what concerns the whole run (normalization skipped)
    # follow-up question id -> its cap, bridge question and {paper: answers not asked about}: kept as counts, not as
    # a line, so a Ray run's chunks add up to one note (each chunk's line differed, and the run sheet had hundreds)
    capped: dict[str, dict[str, Any]] = field(default_factory=dict)
    calibrator: str | None = None  # the confidence stage's calibrator
    # follow-up sub-questions asked about a coder's answers (``run --keep-coding``): told in ``kept_coding``'s sentence
    coded_entities: int = 0
    mlpsych: str = ""
    python: str = ""
    torch: str = ""
    transformers: str = ""
    tokenizers: str = ""  # the fast tokenizers' library: its version can move a span's character offsets
    platform: str = ""
    questions: str = ""  # the question set's source
    models: list[str] = field(default_factory=list)
    adapted_readers: list[str] = field(default_factory=list)  # readers written by `mlpsych adapt`: on what
    demo_models: list[str] = field(default_factory=list)  # random-weight models: their answers mean nothing
    settings: dict[str, Any] = field(default_factory=dict)  # RunSettings.describe()
    reader_dtype: str = ""  # what "auto" resolved to here, to reproduce the run
    llm_dtype: str | None = None  # the same for the LLM, when the run normalizes
    # every model of the run (readers, the cascade's small reader, the LLM) -> its identity as the cache keys it: a
    # Hub model's commit, a folder's files (``mlpsych.cache.model_fingerprint``)
    model_revisions: dict[str, str] = field(default_factory=dict)
    started: str = ""
    seconds: float = 0.0
    cache: str = ""
    cache_hits: int = 0
    cache_misses: int = 0
    windows_read: int = 0
    tokens_read: dict[str, int] = field(default_factory=dict)  # model -> input tokens read (not cached)
    reader_gflops: dict[str, float | None] = field(default_factory=dict)
    models_loaded: list[str] = field(default_factory=list)
    llm_prompts_generated: int = 0
    engine: str | None = None
    workers: int | None = None  # the Ray engine's actors
    kept_coding: str | None = None  # `run --keep-coding`: what was kept from which coded sheet (a sentence)

    # Counts that add up over a Ray engine's chunks (the other facts are the same for every chunk).
    SUMMED: ClassVar[tuple[str, ...]] = ("cache_hits", "cache_misses", "windows_read", "llm_prompts_generated",
                                         "coded_entities")

    def add_capped(self, question: str, record: dict[str, Any]) -> None:
        """Count a follow-up's capped papers in (a level's, or a Ray chunk's): one record per question."""
        self.capped.setdefault(question, {**record, "papers": {}})["papers"].update(record["papers"])

    def notes(self) -> list[str]:
        """The run's notes for its users (the run sheet, the end of the CLI's output, the page): the warnings, and
        for each capped follow-up the papers whose other bridge answers were not asked about."""
        return self.warnings + [capped_note(question, record) for question, record in self.capped.items()]

    def to_dict(self) -> dict[str, Any]:
        """As the run sheet lists it: the notes when there are any, the calibrator, the LLM's dtype and the
        engine's facts when set (the follow-ups asked about coded answers are in ``kept_coding``'s sentence)."""
        data = asdict(self)
        data["warnings"] = self.notes()
        del data["capped"], data["coded_entities"]
        if not data["warnings"]:
            del data["warnings"]
        for key in ("calibrator", "llm_dtype", "engine", "workers", "kept_coding"):
            if data[key] is None:
                del data[key]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    @classmethod
    def gathered(cls, parts: list[RunInfo]) -> RunInfo:
        """One run's facts from its chunks' (the Ray engine): counts summed (the tokens each reader read too),
        models loaded and warnings joined, the other facts the first chunk's (``reader_gflops`` too: the engine
        works them out again from the summed tokens)."""
        if not parts:
            return cls()
        data = asdict(parts[0])
        for key in cls.SUMMED:
            data[key] = sum(getattr(p, key) for p in parts)
        tokens: dict[str, int] = {}
        for part in parts:  # each reader's, over every chunk (a chunk whose papers ask it nothing has it not)
            for model, read in part.tokens_read.items():
                tokens[model] = tokens.get(model, 0) + read
        data["tokens_read"] = tokens
        data["models_loaded"] = [m for p in parts for m in p.models_loaded]
        data["warnings"] = list(dict.fromkeys(w for p in parts for w in p.warnings))
        data["capped"] = {}
        gathered = cls(**data)
        for part in parts:
            for question, record in part.capped.items():
                gathered.add_capped(question, record)
        return gathered


CAPPED_SHOWN = 10  # papers the run's note on capped sub-questions names (each with its count)


def capped_note(question: str, record: dict[str, Any]) -> str:
    """The run's note on papers whose bridge answers were more than the cap: a coder reading their follow-ups
    learns that the other answers were never asked about (the sheets said nothing of it)."""
    left_out: dict[str, int] = record["papers"]
    bridge = record["bridge_from"]
    shown = [f"{paper} ({n} not asked)" for paper, n in list(left_out.items())[:CAPPED_SHOWN]]
    more = f" and {len(left_out) - CAPPED_SHOWN} more" if len(left_out) > CAPPED_SHOWN else ""
    papers = f"{len(left_out)} paper{'s' if len(left_out) > 1 else ''}"
    return (f"{question} was asked about at most {record['cap']} {bridge} answers per paper, the best-scored "
            f"(max_sub_questions in the question file, --max-sub-questions to change it); in {papers} the other "
            f"{bridge} answers were not asked about: {', '.join(shown)}{more}")


@dataclass
class RunResult:
    """Everything a run produced: answers (all rows), per-paper problems, LLM raw outputs and run facts."""

    documents: list[Document]
    questions: QuestionSet
    answers: list[Answer] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    llm_outputs: list[dict] = field(default_factory=list)
    info: RunInfo = field(default_factory=RunInfo)
    # Questions kept without their answers, only to order and phrase the follow-ups that bridge from them: a result
    # narrowed to a follow-up (the app's filtered download) has no rows of them, so the papers sheet has no column.
    bridge_only: frozenset[str] = frozenset()

    def fail(self, doc_id: str, stage: str, error: BaseException) -> None:
        """Record one paper's failure at one stage as its status line (the run goes on without that work)."""
        line = f"{stage}: {one_line(error)}"
        log.warning("%s: %s", doc_id, line)
        self.errors.setdefault(doc_id, []).append(line)


@contextmanager
def isolated(result: RunResult, doc_id: str, stage: str) -> Iterator[None]:
    """Run one paper's share of a stage; an exception becomes that paper's status instead of ending the run.

    A model that cannot be loaded, or a cache that cannot be used, concerns every paper and still stops the run
    (finished work is cached); an LLM that cannot be used concerns every paper too and ends the normalization
    stage (extractive answers stay).
    """
    try:
        yield
    except (ModelLoadError, CacheError, NormalizerUnavailable):
        raise
    except Exception as error:  # noqa: BLE001 - one paper's failure must not lose the others
        result.fail(doc_id, stage, error)
