"""Normalization as a stage: prompts from a question's extractive answers, and the LLM's items back as answers.

The extractive readers return overlapping, differently worded spans ("extreme gradient boosting trees",
"XGB"); the paper's gain came from handing them to an LLM with a question-specific prompt that returns one
standard name per entity. The items it returns are checked against the paper (``grounding``) and kept apart when
the paper does not contain them, because researchers code from this output.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from mlpsych.answers import Answer, AnswerStage, Span
from mlpsych.documents import Document
from mlpsych.normalize.grounding import Grounding, aliases, ground
from mlpsych.normalize.listparse import says_none
from mlpsych.normalize.llm import DEFAULT_LLM, NormalizeResult
from mlpsych.questions import QuestionTemplate

log = logging.getLogger(__name__)


def choose_model(question: QuestionTemplate, override: str | None = None) -> str:
    """The LLM for a question: the command line's choice, else the template's, else the default."""
    if override:
        return override
    if question.normalize is not None and question.normalize.model:
        return question.normalize.model
    return DEFAULT_LLM


def build_prompt(template_prompt: str, answers: list[str], *, max_input_items: int = 60) -> str:
    """The template's prompt with ``{answers}`` replaced by the answers, one per line, deduplicated, capped.

    Only the literal ``{answers}`` is replaced (no ``str.format``), so braces elsewhere in a user's prompt,
    such as a JSON example, are left alone. A prompt without the placeholder gets the answers appended.
    """
    lines: list[str] = []
    seen: set[str] = set()
    for answer in answers:
        line = " ".join(str(answer).split())
        if line and line.casefold() not in seen:
            seen.add(line.casefold())
            lines.append(line)
    if len(lines) > max_input_items:
        log.debug("prompt capped at %d of %d answers", max_input_items, len(lines))
        lines = lines[:max_input_items]
    block = "\n".join(lines)
    if "{answers}" in template_prompt:
        return template_prompt.replace("{answers}", block)
    return f"{template_prompt.rstrip()}\n{block}"


@dataclass
class _Item:
    """One normalized item while combining models: its text, the models that returned it, its grounding."""

    text: str
    models: list[str] = field(default_factory=list)


def prompts_for(question: QuestionTemplate, answers_by_model: dict[str, list[Answer]], *,
                max_input_items: int = 60, input_format: str = "lines") -> dict[str, str]:
    """reader model -> prompt, for each model with answers; best answers first, so the cap drops the weakest.
    ``input_format`` "joined" writes the released code's input instead (``joined_llm_input``)."""
    if question.normalize is None:
        raise ValueError(f"question {question.id!r} has no normalize prompt")
    if input_format == "joined":
        from mlpsych.reading.released import joined_llm_input

        prompt = question.normalize.reference_prompt or question.normalize.prompt
        return {model: joined_llm_input(prompt, [a.text for a in answers])
                for model, answers in answers_by_model.items() if answers}
    return {
        model: build_prompt(question.normalize.prompt, [a.text for a in sorted(answers, key=lambda a: -a.score)],
                            max_input_items=max_input_items)
        for model, answers in answers_by_model.items() if answers
    }


@dataclass
class NormalizeAudit:
    """What the LLM was given and returned for one answer list, per reader model: kept for the run's audit sheet,
    and its errors decide whether the extractive answers stay the answer."""

    llm: str
    combine: str
    prompts: dict[str, str]
    raw_outputs: dict[str, str]
    items: dict[str, list[str]]
    errors: dict[str, str]

    @property
    def readable(self) -> bool:
        """Every model's output gave items or an explicit "none" (``[]``, "None"): prose or garbage from which no list
        could be read says nothing about the paper, so a question that allows no answer keeps its extractive ones."""
        return all(self.items.get(m) or says_none(raw) for m, raw in self.raw_outputs.items())


def combine_results(
    doc: Document,
    question: QuestionTemplate,
    answers_by_model: dict[str, list[Answer]],
    results: dict[str, NormalizeResult],
    *,
    llm: str = "",
    prompts: dict[str, str] | None = None,
) -> tuple[list[Answer], NormalizeAudit]:
    """Per-model LLM results -> grounded answers combined as the template says, plus the audit record."""
    if question.normalize is None:
        raise ValueError(f"question {question.id!r} has no normalize prompt")
    models = [m for m in answers_by_model if m in results]
    audit = NormalizeAudit(
        llm=llm,
        combine=question.normalize.combine,
        prompts=dict(prompts or {}),
        raw_outputs={m: results[m].raw_output if m in results else "" for m in answers_by_model},
        items={m: results[m].items if m in results else [] for m in answers_by_model},
        errors={m: results[m].error for m in models if results[m].error},
    )
    if question.normalize.combine == "per_model":
        groups = [[_Item(text, [m]) for text in results[m].items] for m in models]
    else:
        groups = [_union([(m, results[m].items) for m in models])]
    answers = [
        _to_answer(doc, question, item, [a for m in item.models for a in answers_by_model[m]])
        for group in groups for item in group
    ]
    return answers, audit


def _union(lists: list[tuple[str, list[str]]]) -> list[_Item]:
    """One list over all models, in first-seen order; each item lists the models whose output had it."""
    merged: dict[str, _Item] = {}
    for model, items in lists:
        for text in items:
            entry = merged.setdefault(item_key(text), _Item(text))
            if model not in entry.models:
                entry.models.append(model)
    return list(merged.values())


def item_key(text: str) -> str:
    """Items that are the same entity written differently share a key ("k-NN"/"k NN", "SVMs"/"SVM"); a sign that
    ends a name is part of it: "C++", "C#" and "C" are three languages (all were "c", and two were lost)."""
    words = [w.casefold() for w in re.findall(r"[^\W_]+[+#]*", text)]
    if words and len(words[-1]) > 3 and words[-1].endswith("s") and not words[-1].endswith("ss"):
        words[-1] = words[-1][:-1]
    return " ".join(words) or text.casefold()


def _to_answer(doc: Document, question: QuestionTemplate, item: _Item, sources: list[Answer]) -> Answer:
    """An Answer for one item: located in the paper (near the extractive answer it came from, if any)."""
    names = aliases(item.text, doc.text)
    matched = [a for a in sources if any(ground(name, a.text).grounded for name in names)]
    grounding = _locate(names, doc, matched)
    score = max((a.score for a in matched), default=0.0)
    spans: list[Span] = [s for a in matched for s in a.spans]
    common = dict(doc_id=doc.id, question_id=question.id, text=item.text, models=list(item.models),
                  score=score, spans=spans)
    if not grounding.grounded or grounding.start is None or grounding.end is None:
        return Answer(stage=AnswerStage.UNGROUNDED, **common)
    return Answer(stage=AnswerStage.NORMALIZED, start=grounding.start, end=grounding.end,
                  page=doc.page_at(grounding.start), evidence=doc.sentence_around(grounding.start, grounding.end),
                  **common)


def _locate(names: list[str], doc: Document, matched: list[Answer]) -> Grounding:
    """Ground the item in the paper, preferring the span of the best extractive answer it came from, so the
    evidence is where the reader found it ("LDA" located at that snippet's "latent Dirichlet allocation")."""
    for answer in sorted(matched, key=lambda a: -a.score):
        if answer.start is None or answer.end is None:
            continue
        for name in names:
            local = ground(name, doc.text[answer.start:answer.end])
            if local.grounded and local.start is not None and local.end is not None:
                return Grounding(True, local.how, local.start + answer.start, local.end + answer.start)
    return ground(names[0], doc.text)
