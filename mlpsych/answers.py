"""Plain data passed between the stages: raw spans from a reader and the answers built from them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


@dataclass
class Span:
    """One extracted span; ``start``/``end`` are character offsets into ``Document.text``."""

    doc_id: str
    question_id: str
    model: str
    text: str
    start: int
    end: int
    score: float
    null_score: float | None = None
    page: int | None = None
    evidence: str = ""
    bridge_entity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Span":
        return cls(**data)


class AnswerStage(StrEnum):
    """What produced an answer; written as its value ("extractive", ...) in the sheets and in JSON."""

    EXTRACTIVE = "extractive"  # a reader's spans, after merging
    NORMALIZED = "normalized"  # an LLM list item grounded in the paper
    UNGROUNDED = "ungrounded"  # an LLM item the paper does not contain, kept apart for review
    CODER = "coder"  # a sheet row a coder added in the review view (never produced by a run; `--keep-coding` keeps it)


@dataclass
class Answer:
    """An answer to one question for one paper, as it goes into the spreadsheet.

    ``stage`` says what produced it (:class:`AnswerStage`).
    """

    doc_id: str
    question_id: str
    text: str
    stage: AnswerStage
    models: list[str]
    score: float
    start: int | None = None
    end: int | None = None
    page: int | None = None
    evidence: str = ""
    bridge_entity: str | None = None
    spans: list[Span] = field(default_factory=list)
    ensemble: bool = False  # combined over several models (rather than one model's own list)
    final: bool = False  # part of the paper's answer in the spreadsheet (the rest is kept for evaluation)
    confidence: float | None = None  # final answers: the calibrated probability a coder marks it correct
    # A row kept from a coded sheet (`mlpsych run --keep-coding`): its cells of the columns a run does not write
    # (correct, corrected_answer, notes, a second coder's correct_2, a lab's own), written back as they were.
    coder: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.stage = AnswerStage(self.stage)  # a misspelt stage fails here, not in a sheet

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stage"] = str(self.stage)
        data["spans"] = [s.to_dict() for s in self.spans]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Answer":
        data = dict(data)
        data["spans"] = [Span.from_dict(s) for s in data.get("spans", [])]
        return cls(**data)
