"""Plain data passed between the stages: raw spans from a reader and the answers built from them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
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


@dataclass
class Answer:
    """An answer to one question for one paper, as it goes into the spreadsheet.

    ``stage`` says what produced it: ``extractive`` (reader, after merging), ``normalized`` (LLM list item
    grounded in the paper) or ``ungrounded`` (LLM item not found in the paper, kept apart for review).
    """

    doc_id: str
    question_id: str
    text: str
    stage: str
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

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spans"] = [s.to_dict() for s in self.spans]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Answer":
        data = dict(data)
        data["spans"] = [Span.from_dict(s) for s in data.get("spans", [])]
        return cls(**data)
