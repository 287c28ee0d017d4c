"""One answer for one thing the paper names twice.

A paper writes "random forests (RF)" once and "RF" afterwards, so a reader returns "RF" and "random forest" as two
answers of one question: two rows for a coder to reconcile, two counts in the frequencies sheet. Where the paper's
own definition links them (``grounding.definition_of``: the abbreviation's letters spelt by the long form before the
bracket, the one definition of those letters in the paper), they become one answer whose text is that definition,
"random forests (RF)", at its first occurrence: an exact span with its page and sentence, like any answer.
"""

from __future__ import annotations

from mlpsych.answers import Answer
from mlpsych.documents import Document
from mlpsych.normalize.grounding import definition_of
from mlpsych.settings import AbbreviationMode


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def link_abbreviations(doc: Document, answers: list[Answer], mode: AbbreviationMode) -> list[Answer]:
    """``answers`` with the ones a definition links replaced by one answer of the definition's text, in the place of
    the first of them; the others unchanged, in order."""
    if mode == "off":
        return answers
    groups: dict[tuple[int, int], list[Answer]] = {}
    for answer in answers:
        pair = definition_of(answer.text, doc.text)
        if pair is not None and pair.definition_end is not None:
            groups.setdefault((pair.long_start, pair.definition_end), []).append(answer)
    linked = {id(a): span for span, members in groups.items()
              if mode == "all" or len({_key(a.text) for a in members}) > 1 for a in members}
    out: list[Answer] = []
    placed: set[tuple[int, int]] = set()
    for answer in answers:
        span = linked.get(id(answer))
        if span is None:
            out.append(answer)
        elif span not in placed:
            placed.add(span)
            out.append(_definition_answer(doc, span, groups[span]))
    return out


def _definition_answer(doc: Document, span: tuple[int, int], members: list[Answer]) -> Answer:
    """The group's answer: the definition's text and place, the best member's score, every member's models and
    spans (the reading behind it stays inspectable)."""
    best = max(members, key=lambda a: a.score)
    start, end = span
    return Answer(
        doc_id=best.doc_id,
        question_id=best.question_id,
        text=" ".join(doc.text[start:end].split()),
        stage=best.stage,
        models=sorted({m for a in members for m in a.models}),
        score=best.score,
        start=start,
        end=end,
        page=doc.page_at(start),
        evidence=doc.sentence_around(start, end),
        bridge_entity=best.bridge_entity,
        spans=[s for a in members for s in a.spans],
        ensemble=best.ensemble,
        final=best.final,
    )

