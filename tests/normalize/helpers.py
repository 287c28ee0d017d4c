"""The whole normalization of one paper's answer lists in one call, as tests want it (the pipeline batches
``prompts_for`` and ``combine_results`` over many papers instead)."""

from __future__ import annotations

from mlpsych.answers import Answer
from mlpsych.documents import Document
from mlpsych.normalize.answers import NormalizeAudit, combine_results, prompts_for
from mlpsych.normalize.llm import Normalizer
from mlpsych.questions import QuestionTemplate


def normalize_answers(
    doc: Document,
    question: QuestionTemplate,
    answers_by_model: dict[str, list[Answer]],
    normalizer: Normalizer,
) -> tuple[list[Answer], NormalizeAudit]:
    """LLM-normalized answers of one question for one paper, grounded in the paper, and the audit record."""
    prompts = prompts_for(question, answers_by_model, max_input_items=normalizer.max_input_items)
    results = dict(zip(prompts, normalizer.run(list(prompts.values()))))
    return combine_results(doc, question, answers_by_model, results, llm=normalizer.model_name, prompts=prompts)
