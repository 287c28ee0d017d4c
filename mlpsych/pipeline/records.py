"""The records the stages pass along: one unit of work per question asked of a paper, and its answers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from mlpsych import progress
from mlpsych.answers import Answer, Span
from mlpsych.documents import Document
from mlpsych.multihop import CodedBridges
from mlpsych.progress import ProgressEvent
from mlpsych.questions import QuestionTemplate
from mlpsych.reading.reader import Query


@dataclass
class Unit:
    """One question (or multi-hop sub-question) asked of one paper, and what the readers found for it."""

    doc: Document
    question: QuestionTemplate
    query: Query
    small_spans: list[Span] | None = None  # the cascade's small reader's spans (select stage), when it has a cascade
    # reader model -> character ranges of the windows the cascade chose for it (read stage): a bridged question's
    # sub-questions may read those again (``CascadeSettings.bridge_windows``)
    chosen: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # reader model -> the ranges chosen for the bridge's source question that name this sub-question's entity
    # (follow-up stage, ``bridge_windows: source``): read instead of a choice of the small reader's
    source: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    spans: dict[str, list[Span]] = field(default_factory=dict)  # reader model -> its spans (read stage)

    def read_spans(self) -> dict[str, list[Span]]:
        """The spans read, in the question's model order (the order its answers and prompts follow)."""
        return {m: self.spans[m] for m in self.question.models if m in self.spans}


@dataclass(frozen=True)
class Settled:
    """What a coder's coding kept by the run (``run --keep-coding``) settles before anything is read: the (paper,
    question) pairs whose coded rows stand in the sheet whatever the run answers, so no unit is made for them (not
    read, cascade-read nor normalized: a question added to a coded study's file reads that question alone), and the
    follow-ups whose entities come from the coding of their bridge question (``bridges``)."""

    pairs: dict[str, list[str]] = field(default_factory=dict)  # paper id -> its question ids coded
    bridges: CodedBridges = field(default_factory=CodedBridges)

    def covers(self, paper: str, question: str) -> bool:
        """The coding settles ``question`` in ``paper``: the run does not ask it there."""
        return question in self.pairs.get(paper, ())

    def asked(self, papers: Iterable[str], questions: Sequence[str]) -> list[frozenset[str]]:
        """Per paper, the ones of ``questions`` the run asks there."""
        return [frozenset(q for q in questions if not self.covers(p, q)) for p in papers]

    def only(self, papers: Iterable[str]) -> Settled:
        """Those of these papers alone (a Ray chunk's share)."""
        keep = set(papers)
        return Settled({p: qs for p, qs in self.pairs.items() if p in keep}, self.bridges.only(keep))

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Settled:
        data = json.loads(text)
        return cls(data["pairs"], CodedBridges(**data["bridges"]))


@dataclass
class UnitAnswers:
    """A unit's answers (merge stage): each model's answer list, and every row it produced (those lists plus the
    models' combined list)."""

    unit: Unit
    per_model: dict[str, list[Answer]]
    rows: list[Answer]


@dataclass
class Level:
    """One level of the run: questions whose bridge questions are answered, and what each stage adds to it."""

    questions: list[QuestionTemplate]
    docs: list[Document]  # the readable papers
    first_row: int = 0  # where the level's rows start in the run's answers
    units: list[Unit] = field(default_factory=list)  # follow-up stage
    answered: list[UnitAnswers] = field(default_factory=list)  # merge stage

    @property
    def label(self) -> str:
        """The level's question ids, as progress bars and problem lines name it."""
        return ",".join(q.id for q in self.questions)


@dataclass(frozen=True)
class LevelSize:
    """What a level's stages plan their progress on: a first level's work is one unit per paper and question it
    asks there (all of them, but those a kept coding settles); a follow-up level's is its sub-questions, which exist
    only once the level before it is answered (``units`` None until then: its stages are reported not
    ``counted``)."""

    questions: list[QuestionTemplate]
    asked: list[frozenset[str]]  # per readable paper, the level's question ids asked in it
    units: dict[str, int] | None  # question id -> units (answer lists) to do

    @classmethod
    def planned(cls, questions: list[QuestionTemplate], asked: list[frozenset[str]]) -> LevelSize:
        """A level as planned before the run: a follow-up level's sub-questions are not known yet."""
        units = None if is_follow_up(questions) else {q.id: sum(q.id in a for a in asked) for q in questions}
        return cls(questions, asked, units)

    @classmethod
    def counted(cls, level: Level) -> LevelSize:
        """A level whose units exist (after the follow-up stage)."""
        per_question = {q.id: 0 for q in level.questions}
        per_paper: dict[str, set[str]] = {}
        for unit in level.units:
            per_question[unit.question.id] += 1
            per_paper.setdefault(unit.doc.id, set()).add(unit.question.id)
        return cls(level.questions, [frozenset(ids) for ids in per_paper.values()], per_question)

    def reads(self, ids: tuple[str, ...]) -> int:
        """A reading stage's units for these questions: the papers asking any of them, or a follow-up level's
        sub-questions."""
        if self.units is None:
            return 0
        if is_follow_up(self.questions):
            return sum(self.units[q] for q in ids)
        return sum(not asked.isdisjoint(ids) for asked in self.asked)

    def answer_lists(self, ids: tuple[str, ...]) -> int:
        """The answer lists of these questions (one per paper, or per sub-question, and question)."""
        return 0 if self.units is None else sum(self.units[q] for q in ids)

    def event(self, stage: progress.Stage, ids: tuple[str, ...], model: str, total: int,
              unit: progress.Unit | None = None) -> ProgressEvent:
        """A stage's planned progress event (nothing done yet)."""
        return ProgressEvent(stage, ids, model, 0, total, unit or reading_unit(self.questions),
                             counted=self.units is not None)


def is_follow_up(questions: list[QuestionTemplate]) -> bool:
    """A level of bridged (multi-hop) questions, asked once per entity of an earlier answer."""
    return any(q.bridge_from for q in questions)


def reading_unit(questions: list[QuestionTemplate]) -> progress.Unit:
    """What a level's reading progress counts: papers, or a follow-up level's sub-questions."""
    return "sub-question" if is_follow_up(questions) else "paper"
