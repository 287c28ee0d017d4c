"""Multi-hop questions as several single hops through bridge entities.

A template such as "What was __PLACEHOLDER__ used for?" with ``bridge_from: q1`` is asked once per entity
that q1 found in the same paper ("What was random forest used for?"). The bridge entities are q1's grounded
normalized answers when the LLM stage ran, else its extractive answers; ungrounded LLM items do not become
sub-questions (a question about something the paper does not mention can only yield noise), except under
``--preset reference``, which keeps them as the released code did.

A rerun that keeps a coder's coding (``run --keep-coding``) asks a follow-up, in a paper whose bridge question was
coded, about the coding's answers instead (:class:`CodedBridges`): the coder's list of techniques, not the tool's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mlpsych.answers import Answer, AnswerStage
from mlpsych.questions import QuestionTemplate


@dataclass(frozen=True)
class CodedBridges:
    """Per follow-up question and paper, the entities it asks about taken from a coder's coding of its bridge
    question (``run --keep-coding``) instead of the run's own answers to it, which the coder fixed: an answer
    they added is asked about, one they marked wrong is not, a corrected one under the corrected text."""

    entities: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # follow-up id -> paper id -> entities

    def of(self, question: str, paper: str) -> list[str] | None:
        """The coding's entities for ``question`` in ``paper``; None where the run's own answers are bridged."""
        return self.entities.get(question, {}).get(paper)

    def only(self, papers: Iterable[str]) -> CodedBridges:
        """Those of these papers alone (a Ray chunk's share)."""
        keep = set(papers)
        return CodedBridges({q: {p: e for p, e in by_paper.items() if p in keep}
                             for q, by_paper in self.entities.items()})


def bridge_entities(answers: list[Answer], cap: int, case: str = "casefold",
                    llm_stages: tuple[AnswerStage, ...] = (AnswerStage.NORMALIZED,)) -> list[str]:
    """The first ``cap`` of :func:`ranked_entities`: the entities asked about."""
    return ranked_entities(answers, case, llm_stages)[:max(cap, 0)]


def ranked_entities(answers: list[Answer], case: str = "casefold",
                    llm_stages: tuple[AnswerStage, ...] = (AnswerStage.NORMALIZED,)) -> list[str]:
    """Entities a bridged question may ask about: the LLM's items of ``llm_stages`` if any (grounded ones;
    ungrounded too where the run keeps them, as the released code did), else extractive answers; best score first.
    A repeated entity is asked once, compared ignoring case (``casefold``) or as written (``exact``, the released
    union of lists)."""
    normalized = [a for a in answers if a.stage in llm_stages]
    pool = normalized or [a for a in answers if a.stage == AnswerStage.EXTRACTIVE]
    ranked = sorted(pool, key=lambda a: -a.score)  # stable: equal scores keep the stage's order
    return distinct((a.text for a in ranked), case)


def distinct(texts: Iterable[str], case: str = "casefold") -> list[str]:
    """The texts as entities, white space as one space, each once (compared as :func:`ranked_entities` says), in
    the given order; blank ones dropped."""
    entities: list[str] = []
    seen: set[str] = set()
    for text in texts:
        entity = " ".join(text.split())
        key = entity.casefold() if case == "casefold" else entity
        if entity and key not in seen:
            seen.add(key)
            entities.append(entity)
    return entities


def entities_to_ask(question: QuestionTemplate, entities: list[str], retrieving: bool) -> list[str]:
    """The bridge entities, then, only when retrieval picks what is read, the template's ``also_ask`` entities
    not already among them (compared ignoring case); a full read asks exactly the paper's sub-questions."""
    extra = question.retrieval.also_ask if retrieving and question.retrieval is not None else []
    found = {e.casefold() for e in entities}
    return entities + [e for e in extra if e.casefold() not in found]


def sub_questions(question: QuestionTemplate, entities: list[str]) -> list[tuple[str, str]]:
    """``(entity, question text with the placeholder filled)`` for each entity, in the given order."""
    if not question.bridge_from or question.placeholder not in question.text:
        raise ValueError(f"question {question.id!r} has no bridge_from / {question.placeholder} to fill")
    return [(entity, question.sub_question(entity)) for entity in entities]
