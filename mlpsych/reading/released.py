"""The post-processing of the paper's released code, reproduced from its description and its outputs (not from its code).

"Zero-Shot Complex Question-Answering on Long Scientific Documents" released code that handles one model's
answers differently from the paper's text (``merge.py`` keeps the project's own rules; this module is the
reference to compare with). :func:`released_answers` takes one model's raw answers for one question of one paper,
in rank order (best score first, as the question-answering pipeline returns its top 30), and applies, in this
order (each step checked against the released code's outputs on the development papers: docs/reference.md,
``benchmarks/reference_equivalence.py --cases``):

1. Cutoff: only the first ``read`` (20) answers are read.
2. Score filter: an answer whose ``round(score, 5)`` is not above 0 is dropped, except the first of the list,
   which is always kept.
3. Merging by location (when the question merges): each answer, in rank order, is compared with the answers
   kept so far, in the order of the kept list; the first one its positions overlap, touching included (only
   ``start > kept.end or end < kept.start`` is apart, so [0, 5) and [5, 9) merge), grows to cover both, its
   text re-read from the document and its score the kept one's, and moves to the end of the kept list. An answer
   that overlaps none is appended. Grown answers are not merged again with each other by location, so two kept
   answers may overlap.
4. Trimming: leading and trailing characters among `` ,.-(;`` are stripped (only these: the space, not other
   white space), and a trailing ``)`` too when what is left has no ``(``; offsets move with the text. Answers left
   empty are dropped.
5. Merging by text (when the question merges): the trimmed answers, in the order of the kept list, are compared
   the same way with the answers kept by this step (case-sensitive substrings; the first match decides): a text
   inside a kept text (or equal to it) is dropped; a kept text inside the new one is replaced in place by the new
   text and offsets (its score stays). So "R" is swallowed by "Random forest", and so is "r" (fo-r-est), but
   "random" is not.

   Without merging, answers are only cut, filtered, trimmed, and kept once per identical text.
6. Records: :class:`Answer` rows in kept order, stage ``extractive``, the model's name, the kept score, the text
   as the document has it between the answer's offsets (white space inside kept, as the released code keeps it),
   the page and evidence sentence of the start, and every raw span that went into it.

:func:`union_of_models` is the released combination of several models (a plain union of answer texts),
:func:`per_entity_answers` its reading of a multi-hop sub-question's answers, and :func:`joined_llm_input` its
LLM user message. All are pure functions over the records; nothing here loads a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlpsych.answers import Answer, AnswerStage, Span
from mlpsych.documents import Document
from mlpsych.reading.merge import JUNK
SCORE_DECIMALS = 5
READ = 20  # raw answers the post-processing reads, of the pipeline's top 30
ENTITY_READ = 5  # raw answers read per multi-hop sub-question
ENTITY_KEEP = 3  # answers kept of those


@dataclass
class _Kept:
    """An answer while merging: its current offsets and text, the kept score, the raw spans behind it."""

    start: int
    end: int
    text: str
    score: float
    spans: list[Span] = field(default_factory=list)


def trim_bounds(text: str) -> tuple[int, int]:
    """``(i, j)`` such that ``text[i:j]`` is ``text`` without leading/trailing junk.

    Junk is any of `` ,.-(;`` at either end; then a trailing ``)`` goes when what is left holds no ``(`` (so
    "(SVM)" and "SVM)." become "SVM", "SVM (RBF)" stays).
    """
    i, j = 0, len(text)
    while i < j and text[i] in JUNK:
        i += 1
    while j > i and text[j - 1] in JUNK:
        j -= 1
    while j > i and text[j - 1] == ")" and "(" not in text[i:j]:
        j -= 1
        while j > i and text[j - 1] in JUNK:
            j -= 1
    return i, j


def _score_filter(spans: list[Span]) -> list[Span]:
    return [s for n, s in enumerate(spans) if n == 0 or round(s.score, SCORE_DECIMALS) > 0]


def _merged_by_location(doc: Document, spans: list[Span]) -> list[_Kept]:
    """Step 3: each span grows the first kept answer it overlaps or touches, which then moves to the end."""
    kept: list[_Kept] = []
    for span in spans:
        home = next((k for k in kept if not (span.start > k.end or span.end < k.start)), None)
        if home is None:
            kept.append(_Kept(span.start, span.end, span.text, span.score, [span]))
            continue
        home.start, home.end = min(home.start, span.start), max(home.end, span.end)
        home.text = doc.text[home.start : home.end]
        home.spans.append(span)
        kept.remove(home)
        kept.append(home)
    return kept


def _trimmed(kept: list[_Kept]) -> list[_Kept]:
    """Step 4: junk stripped from both ends (offsets follow); answers left empty are dropped."""
    out = []
    for item in kept:
        i, j = trim_bounds(item.text)
        if i < j:
            out.append(_Kept(item.start + i, item.end - (len(item.text) - j), item.text[i:j], item.score, item.spans))
    return out


def _merged_by_text(kept: list[_Kept]) -> list[_Kept]:
    """Step 5: a text inside a kept one is dropped into it; a kept text inside a new one takes the new text and
    offsets; the first kept answer that matches decides."""
    out: list[_Kept] = []
    for item in kept:
        for home in out:
            if item.text in home.text:
                home.spans.extend(item.spans)
                break
            if home.text in item.text:
                home.start, home.end, home.text = item.start, item.end, item.text
                home.spans.extend(item.spans)
                break
        else:
            out.append(item)
    return out


def _unique(kept: list[_Kept]) -> list[_Kept]:
    """Without merging: identical texts kept once, the first."""
    out: dict[str, _Kept] = {}
    for item in kept:
        if item.text in out:
            out[item.text].spans.extend(item.spans)
        else:
            out[item.text] = item
    return list(out.values())


def _bridge(spans: list[Span]) -> str | None:
    return next((s.bridge_entity for s in spans if s.bridge_entity is not None), None)


def _record(doc: Document, item: _Kept) -> Answer:
    """The answer row: white space at the ends left out of its offsets and text (the released code strips each
    answer), white space inside kept as the document has it."""
    first = item.spans[0]
    start = item.start + len(item.text) - len(item.text.lstrip())
    end = max(start, item.end - (len(item.text) - len(item.text.rstrip())))
    return Answer(
        doc_id=first.doc_id,
        question_id=first.question_id,
        text=item.text.strip(),
        stage=AnswerStage.EXTRACTIVE,
        models=[first.model],
        score=item.score,
        start=start,
        end=end,
        page=doc.page_at(start),
        evidence=doc.sentence_around(start, end),
        bridge_entity=_bridge(item.spans),
        spans=list(item.spans),
    )


def released_answers(doc: Document, spans: list[Span], *, merge: bool = True, read: int | None = READ
                     ) -> list[Answer]:
    """One model's answers to one question of one paper by the released code's rules (see the module's text).

    ``spans`` is the model's raw list in rank order, as the question-answering pipeline returns it; only the
    first ``read`` are used (None: all).
    """
    spans = _score_filter(spans[:read])
    if merge:
        kept = _merged_by_text(_trimmed(_merged_by_location(doc, spans)))
    else:
        kept = _unique(_trimmed([_Kept(s.start, s.end, s.text, s.score, [s]) for s in spans]))
    return [_record(doc, item) for item in kept]


def union_of_models(answers_by_model: dict[str, list[Answer]]) -> list[Answer]:
    """The released combination of several models: a plain union of their answer texts.

    Models in the given order, each model's answers in order; an answer whose exact text was already taken is
    not added again, but its model (and its spans) join the taken one, which keeps its own score and offsets.
    The answers are copies (the inputs are left alone), marked ``ensemble`` when there are two or more models.
    """
    taken: dict[str, Answer] = {}
    for model, answers in answers_by_model.items():
        for answer in answers:
            home = taken.get(answer.text)
            if home is None:
                taken[answer.text] = Answer.from_dict(answer.to_dict())
                continue
            for name in [*answer.models, model]:
                if name not in home.models:
                    home.models.append(name)
            home.spans.extend(Span.from_dict(s.to_dict()) for s in answer.spans)
    union = list(taken.values())
    if len(answers_by_model) > 1:
        for answer in union:
            answer.ensemble = True
    return union


def per_entity_answers(doc: Document, spans: list[Span], keep: int = ENTITY_KEEP, *,
                       read: int = ENTITY_READ) -> list[Answer]:
    """Answers to a multi-hop sub-question ("What was random forest used for?") as the released code reads them.

    Of the first ``read`` raw answers (rank order), an answer whose text is a substring of (or equal to) an
    answer already kept is skipped (case-sensitive), until ``keep`` are kept. No score filter, no trimming and
    no merging: a text that contains a kept one is kept beside it, and texts stay as the model gave them.
    """
    kept: list[_Kept] = []
    for span in spans[:read]:
        if len(kept) >= keep:
            break
        if any(span.text in k.text for k in kept):
            continue
        kept.append(_Kept(span.start, span.end, span.text, span.score, [span]))
    return [_record(doc, item) for item in kept]


def joined_llm_input(prompt: str, answers: list[str]) -> str:
    """The released code's LLM user message: the prompt, then the distinct stripped answers, sorted (code point
    order, so capitals first) and joined by ", "; empty answers are left out. No separator is added after the
    prompt, and nothing is capped (compare ``mlpsych.normalize.answers.build_prompt``)."""
    return prompt + ", ".join(sorted({a.strip() for a in answers} - {""}))
