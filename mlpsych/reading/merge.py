"""Merging a question's spans into answers, by the paper's rules.

1. spans overlapping in position become one span covering both (the best score kept);
2. of two answer texts where one contains the other, the longer is kept;
3. leading/trailing junk characters are trimmed (`` ,.-(;`` in the paper);
4. answers without a letter are dropped.
With merging off (a per-question switch) only trimming, the letter rule and removal of identical texts apply.
Spans of several models go through the same rules, so merging also combines models (see ensemble.py).
"""

from __future__ import annotations

from mlpsych.answers import Answer, AnswerStage, Span
from mlpsych.documents import Document

JUNK = " ,.-(;"


def trim(doc: Document, start: int, end: int, junk: str = JUNK) -> tuple[int, int]:
    """Offsets with leading/trailing junk characters (and white space) removed."""
    text = doc.text
    while start < end and (text[start] in junk or text[start].isspace()):
        start += 1
    while end > start and (text[end - 1] in junk or text[end - 1].isspace()):
        end -= 1
    return start, end


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def _answer(doc: Document, spans: list[Span], stage: AnswerStage = AnswerStage.EXTRACTIVE) -> Answer:
    best = max(spans, key=lambda s: s.score)
    start, end = min(s.start for s in spans), max(s.end for s in spans)
    return Answer(
        doc_id=best.doc_id,
        question_id=best.question_id,
        text=" ".join(doc.text[start:end].split()),
        stage=stage,
        models=sorted({s.model for s in spans}),
        score=best.score,
        start=start,
        end=end,
        page=doc.page_at(start),
        evidence=doc.sentence_around(start, end),
        bridge_entity=best.bridge_entity,
        spans=list(spans),
    )


def _trimmed(doc: Document, spans: list[Span], junk: str) -> list[Span]:
    out = []
    for span in spans:
        start, end = trim(doc, span.start, span.end, junk)
        text = doc.text[start:end]
        if not any(ch.isalpha() for ch in text):
            continue
        if (start, end) != (span.start, span.end):
            span = Span(**{**span.to_dict(), "start": start, "end": end, "text": text})
        out.append(span)
    return out


def _merge_overlapping(spans: list[Span]) -> list[list[Span]]:
    groups: list[list[Span]] = []
    group_end = -1
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if groups and span.start < group_end:
            groups[-1].append(span)
            group_end = max(group_end, span.end)
        else:
            groups.append([span])
            group_end = span.end
    return groups


def _group_by_text(answers: list[Answer], nested: bool) -> list[Answer]:
    """Identical texts become one answer; with ``nested``, a text contained in a longer one joins it."""
    ordered = sorted(answers, key=lambda a: (-len(_key(a.text)), -a.score))
    kept: list[Answer] = []
    for answer in ordered:
        key = _key(answer.text)
        home = next(
            (k for k in kept if key == _key(k.text) or (nested and _contains(_key(k.text), key))),
            None,
        )
        if home is None:
            kept.append(answer)
            continue
        home.spans.extend(answer.spans)
        home.models = sorted(set(home.models) | set(answer.models))
        home.score = max(home.score, answer.score)
    return sorted(kept, key=lambda a: -a.score)


def _contains(longer: str, shorter: str) -> bool:
    """Whole-word containment, so "R" is not swallowed by every word with an r in it."""
    padded = f" {longer} "
    return f" {shorter} " in padded or (len(shorter) > 3 and shorter in longer)


def merge_spans(doc: Document, spans: list[Span], *, merge: bool = True, junk: str = JUNK) -> list[Answer]:
    """Answers for one question of one paper from the spans of one or more models, best first."""
    spans = _trimmed(doc, spans, junk)
    if merge:
        answers = [_answer(doc, group) for group in _merge_overlapping(spans)]
    else:
        answers = [_answer(doc, [span]) for span in spans]
    return _group_by_text(answers, nested=merge)


def combine(doc: Document, spans_by_model: dict[str, list[Span]], *, merge: bool = True) -> list[Answer]:
    """One answer list from all of a question's models (the ensemble): the same merging rules run over every
    model's spans together. Each answer keeps the models that produced it (its agreement count is
    ``len(models)``) and its best score."""
    every = [span for spans in spans_by_model.values() for span in spans]
    return merge_spans(doc, every, merge=merge)
