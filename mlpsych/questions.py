"""Question templates: the schema, loading from YAML/JSON, and validation with errors a researcher can act on."""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from mlpsych.files import written_whole
from mlpsych.errors import QuestionFileError

PLACEHOLDER = "__PLACEHOLDER__"
# Columns the papers sheet (export.paper_rows) and the app's answers table write beside one column per question id:
# a question with one of these ids would overwrite them (a paper's status replaced by its answers), so it is refused.
RESERVED_IDS = ("paper_id", "source_file", "status", "text_notes", "paper")
# Validation context: the file is one of several answered together, so a bridge_from may name a question of another
# file (an add-on file of follow-ups to the library's q1); bridges are checked on the merged set.
BRIDGES_ELSEWHERE = "bridges_elsewhere"
# Where named template sets live: the project's questions/ folder (next to the package in a checkout).
LIBRARY_PACKAGE = "mlpsych.library"  # the repository's questions/ folder, shipped in the wheel under this name


@dataclass(frozen=True)
class QuestionKind:
    """What a kind of answer sets when a template does not say."""

    max_answer_tokens: int  # longest answer, in tokens


# The kinds of answer a template may name, with their defaults: a new kind is one entry. Entities: the
# transformers pipeline's 15 tokens (30 measured no better on q1 and q2); phrases: 96, as gold phrase answers (q3)
# average 26 words (better than 15 on both halves of the development papers: benchmarks/README.md,
# answer_quality); numbers: an entity's 15.
QUESTION_KINDS: dict[str, QuestionKind] = {
    "entity": QuestionKind(max_answer_tokens=15),
    "phrase": QuestionKind(max_answer_tokens=96),
    "number": QuestionKind(max_answer_tokens=15),
}



class NormalizeSpec(BaseModel):
    """How the LLM stage turns a question's extractive answers into a clean list."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1)
    model: str | None = None
    combine: Literal["union", "per_model"] = "union"
    # The paper's released prompt, verbatim, for ``--preset reference`` (its answers are appended to it joined by
    # ", "); None: ``prompt`` is used there too.
    reference_prompt: str | None = Field(default=None, min_length=1)


class RetrievalSpec(BaseModel):
    """Which windows of a paper are read for the question (``all`` reproduces the paper)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["all", "bm25", "dense"] = "all"
    budget: int = Field(default=8, ge=1)  # windows read; the least when ``share`` is set
    # Share of the paper's windows to read, between ``budget`` and ``max_budget``: a long paper spreads what
    # answers a question (its methods, say) over more windows than a short one.
    share: float | None = Field(default=None, gt=0, le=1)
    max_budget: int | None = Field(default=None, ge=1)
    # Words added to the question when windows are scored ("software package library version").
    query: str = ""
    # What marks a window worth reading, fused by rank: "question" (BM25/dense on question + query) and the
    # pattern signals of mlpsych.retrieval.signals ("methods", "software", "aims", "purpose", "early").
    signals: list[Literal["question", "methods", "software", "aims", "purpose", "early"]] = Field(
        default_factory=lambda: ["question"], min_length=1)
    diverse: bool = False  # prefer windows that name methods/software not yet covered by the windows picked
    # What is chosen: whole windows, or sentences packed into ``budget`` windows (for answers stated in single
    # sentences spread over the paper, such as method names). With sentences, the signals rank one after
    # another (the first decides, the next breaks its ties) and only sentences with some signal are read.
    unit: Literal["window", "sentence"] = "window"
    # For a bridged question: entities asked about besides the bridge entities, only when retrieval is on. A
    # sub-question then reads its entity's windows, not the paper; a general term ("machine learning") reaches
    # the passages that state purposes without naming a technique, which reading the paper per sub-question did.
    also_ask: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _budget_range(self) -> "RetrievalSpec":
        if self.max_budget is not None and self.max_budget < self.budget:
            raise ValueError(f"max_budget ({self.max_budget}) is below budget ({self.budget})")
        return self


class QuestionTemplate(BaseModel):
    """One predetermined question and the configuration that answers it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    text: str = Field(min_length=3)
    kind: str = "entity"  # a key of QUESTION_KINDS
    models: list[str] = Field(min_length=1)
    top_k: int = Field(default=5, ge=1, le=200)
    max_answer_tokens: int | None = Field(default=None, ge=1, le=512)
    merge: bool = True
    allow_empty: bool = False
    normalize: NormalizeSpec | None = None
    bridge_from: str | None = None
    placeholder: str = PLACEHOLDER
    max_sub_questions: int = Field(default=20, ge=1)
    retrieval: RetrievalSpec | None = None
    experimental: bool = False
    description: str = ""

    @field_validator("id", mode="before")
    @classmethod
    def _id_is_text(cls, question_id: object) -> object:
        """``id: 1`` is a number to YAML (``1.10`` would even become 1.1): said so, with how to write it."""
        if isinstance(question_id, (int, float)) and not isinstance(question_id, bool):
            raise ValueError(f"{question_id!r} is read as a number: write the id as text, e.g. q{question_id} or "
                             f"'{question_id}' in quotes")
        return question_id

    @field_validator("id")
    @classmethod
    def _not_a_paper_column(cls, question_id: str) -> str:
        if question_id.casefold() in RESERVED_IDS:
            raise ValueError(f"{question_id!r} names a column the papers sheet already has ({', '.join(RESERVED_IDS)}): "
                             f"choose another id")
        return question_id

    @field_validator("text")
    @classmethod
    def _words_in_text(cls, text: str) -> str:
        """``text: "   "`` passed the length check, and every paper was read for a question without words."""
        if len(text.strip()) < 3:
            raise ValueError("the question has no words (fewer than 3 characters besides spaces)")
        return text

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in QUESTION_KINDS:
            raise ValueError(f"unknown kind {kind!r} (known: {', '.join(QUESTION_KINDS)})")
        return kind

    @field_validator("models")
    @classmethod
    def _no_blank_models(cls, models: list[str]) -> list[str]:
        if any(not m.strip() for m in models):
            raise ValueError("model ids must not be blank")
        return models

    @model_validator(mode="after")
    def _placeholder_with_bridge(self) -> "QuestionTemplate":
        if self.bridge_from and self.placeholder not in self.text:
            raise ValueError(f"a question with bridge_from must contain {self.placeholder} in its text")
        if not self.bridge_from and self.placeholder in self.text:
            raise ValueError(f"{self.placeholder} in the text needs bridge_from (the question that fills it)")
        if not self.bridge_from and self.retrieval is not None and self.retrieval.also_ask:
            raise ValueError("retrieval.also_ask names sub-questions: it needs bridge_from")
        return self

    @property
    def answer_tokens(self) -> int:
        return self.max_answer_tokens or QUESTION_KINDS[self.kind].max_answer_tokens

    def sub_question(self, entity: str) -> str:
        return self.text.replace(self.placeholder, entity)


class QuestionSet(BaseModel):
    """A template file: named questions answered together."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    description: str = ""
    questions: list[QuestionTemplate] = Field(min_length=1)
    source: str = ""

    @model_validator(mode="after")
    def _check_ids_and_bridges(self, info: ValidationInfo) -> "QuestionSet":
        seen: set[str] = set()
        for q in self.questions:
            if q.id in seen:
                raise ValueError(f"question id {q.id!r} appears twice")
            seen.add(q.id)
        if not (info.context or {}).get(BRIDGES_ELSEWHERE):  # else checked once the files are merged
            ordered_ids(self.questions)  # raises on unknown bridges and cycles
        return self

    def get(self, question_id: str) -> QuestionTemplate:
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(question_id)

    def select(self, ids: list[str] | None) -> "QuestionSet":
        """Only the named questions, plus the questions they bridge from (needed to fill placeholders)."""
        if not ids:
            return self
        known = {q.id for q in self.questions}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise QuestionFileError(f"{self.source}: no question {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        wanted = set(ids)
        changed = True
        while changed:
            changed = False
            for q in self.questions:
                if q.id in wanted and q.bridge_from and q.bridge_from not in wanted:
                    wanted.add(q.bridge_from)
                    changed = True
        return self.model_copy(update={"questions": [q for q in self.questions if q.id in wanted]})

    def in_run_order(self) -> list[QuestionTemplate]:
        order = ordered_ids(self.questions)
        return sorted(self.questions, key=lambda q: order.index(q.id))


def ordered_ids(questions: list[QuestionTemplate]) -> list[str]:
    """Question ids with every bridge before the questions that use it; refuses unknown bridges and cycles."""
    by_id = {q.id: q for q in questions}
    for q in questions:
        if q.bridge_from and q.bridge_from not in by_id:
            raise ValueError(f"question {q.id!r} bridges from unknown question {q.bridge_from!r}")
    order: list[str] = []
    visiting: list[str] = []

    def visit(qid: str) -> None:
        if qid in order:
            return
        if qid in visiting:
            cycle = " -> ".join(visiting[visiting.index(qid):] + [qid])
            raise ValueError(f"bridge cycle: {cycle}")
        visiting.append(qid)
        parent = by_id[qid].bridge_from
        if parent:
            visit(parent)
        visiting.pop()
        order.append(qid)

    for q in questions:
        visit(q.id)
    return order


def _describe(error: ValidationError, raw: dict) -> str:
    """First validation error as 'question <id>: field <name>: <message>'."""
    first = error.errors()[0]
    loc = list(first["loc"])
    where = ""
    if len(loc) >= 2 and loc[0] == "questions" and isinstance(loc[1], int):
        items = raw.get("questions") or []
        qid = items[loc[1]].get("id") if loc[1] < len(items) and isinstance(items[loc[1]], dict) else None
        where = f"question {qid!r}" if qid else f"question #{loc[1] + 1}"
        loc = loc[2:]
    field_name = ".".join(str(part) for part in loc)
    parts = [p for p in (where, f"field {field_name!r}" if field_name else "") if p]
    return ": ".join(parts + [first["msg"].removeprefix("Value error, ")])  # pydantic's prefix of our own messages


def resolve_path(name_or_path: str | Path) -> Path:
    """A file path, or the name of a template set in the questions library (``mlpsych`` -> questions/mlpsych.yaml)."""
    candidate = Path(name_or_path).expanduser()
    if candidate.is_file():
        return candidate
    for folder in (Path.cwd() / "questions", library_dir()):
        for suffix in (".yaml", ".yml", ".json"):
            path = folder / f"{name_or_path}{suffix}"
            if path.is_file():
                return path
    if candidate.is_dir():  # a study folder given for its question file ("mlpsych" above is the library's, though)
        inside = sorted(p.name for p in candidate.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        raise QuestionFileError(f"question file {str(name_or_path)!r} is a folder: give the file itself"
                                + (f" (it holds {', '.join(inside)})" if inside else ""))
    raise QuestionFileError(
        f"question file {name_or_path!r} not found (give a path, or one of: {', '.join(library_names()) or 'none'})"
    )


def library_dir() -> Path:
    """The installed question library: ``questions/`` in a checkout, ``mlpsych/library/`` inside a wheel."""
    return Path(str(importlib.resources.files(LIBRARY_PACKAGE)))


def library_names() -> list[str]:
    folder = library_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def parse_question_set(raw: object, source: str, *, bridges_elsewhere: bool = False) -> QuestionSet:
    if not isinstance(raw, dict):
        raise QuestionFileError(f"{source}: expected a mapping with a 'questions' list at the top level")
    try:
        return QuestionSet.model_validate({**raw, "source": source}, context={BRIDGES_ELSEWHERE: bridges_elsewhere})
    except ValidationError as error:
        raise QuestionFileError(f"{source}: {_describe(error, raw)}") from None


def load_question_set(name_or_path: str | Path, *, bridges_elsewhere: bool = False) -> QuestionSet:
    """Load and validate a template file; any problem is a QuestionFileError naming file, question and field.
    ``bridges_elsewhere``: the file is answered with others, which may hold the questions it bridges from."""
    path = resolve_path(name_or_path)
    try:
        content = path.read_text(encoding="utf-8-sig")  # the byte-order mark Windows editors write is no content
        raw = json.loads(content) if path.suffix == ".json" else yaml.safe_load(content)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as error:
        detail = _read_problem(error)
        raise QuestionFileError(f"{path}: cannot be read as {'JSON' if path.suffix == '.json' else 'YAML'}: {detail}") from None
    return _models_beside(parse_question_set(raw, str(path), bridges_elsewhere=bridges_elsewhere), path.parent)


def _models_beside(question_set: QuestionSet, folder: Path) -> QuestionSet:
    """Model folders the file names relative to itself (``./my-reader``, ``readers/mine`` beside it) as absolute
    paths, so the file runs from any working folder; a path found from the working folder is kept (as before)."""

    def located(model: str) -> str:
        candidate = Path(model).expanduser()
        if candidate.is_absolute() or candidate.exists() or not (folder / candidate).is_dir():
            return model
        return str((folder / candidate).resolve())

    questions = []
    for q in question_set.questions:
        changes: dict = {"models": [located(m) for m in q.models]}
        if q.normalize is not None and q.normalize.model:
            changes["normalize"] = q.normalize.model_copy(update={"model": located(q.normalize.model)})
        questions.append(q.model_copy(update=changes))
    return question_set.model_copy(update={"questions": questions})


# What to do about the YAML mistakes a hand-written question file makes most (its problem -> a hint).
YAML_HINTS = {
    "'\\t'": "indent with spaces: YAML does not allow tabs",
    "mapping values are not allowed here": "put a text holding ': ' in quotes, or check the indentation",
}


def _read_problem(error: Exception) -> str:
    """Why a question file could not be read, in one line that says where."""
    if isinstance(error, yaml.YAMLError):
        return _yaml_problem(error)
    if isinstance(error, UnicodeDecodeError):  # a file saved in a Windows code page ("Qu\xe9 se us\xf3?")
        line = error.object.count(b"\n", 0, error.start) + 1
        return f"line {line} is not UTF-8 text (byte {error.object[error.start]:#04x}): save the file as UTF-8"
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _yaml_problem(error: yaml.YAMLError) -> str:
    """'line 4, column 12: mapping values are not allowed here (hint)': YAML's message spreads where and what over
    several lines, and its first line alone ('while scanning for the next token') says neither."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    hint = next((text for key, text in YAML_HINTS.items() if key in problem), None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return where + problem + (f" ({hint})" if hint else "")


def load_question_sets(names: list[str | Path]) -> QuestionSet:
    """Several template files answered as one set (ids must stay unique across them; a question may bridge from
    another file's question)."""
    if not names:  # --questions "" (a script's unset variable)
        raise QuestionFileError(f"no question file given (give a path, or one of: {', '.join(library_names())})")
    if len(names) == 1:
        return load_question_set(names[0])
    sets = [load_question_set(n, bridges_elsewhere=True) for n in names]
    merged = [q for s in sets for q in s.questions]
    return parse_question_set(
        {"name": "+".join(s.name or Path(s.source).stem for s in sets), "questions": [q.model_dump() for q in merged]},
        ", ".join(s.source for s in sets),
    )


def dump_question_set(question_set: QuestionSet, path: Path) -> None:
    """Write a template set as YAML (used by the app's question form and by the tiny-model builder), whole: a run
    reading the file while `mlpsych dev tiny-models` wrote it again found it empty ("expected a mapping with a
    'questions' list"), and so did a second tiny-models checking what it had just written."""
    data = question_set.model_dump(exclude={"source"}, exclude_defaults=True)
    data["questions"] = [q.model_dump(exclude_defaults=True) | {"id": q.id, "text": q.text, "models": q.models} for q in question_set.questions]
    with written_whole(path) as partial:
        partial.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
