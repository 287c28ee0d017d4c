"""The merge stage: each model's spans become its answer list (by the merging rules the settings name), several
models' lists one combined list, and the unit's final answers are marked."""

from __future__ import annotations

from collections.abc import Callable

from mlpsych.answers import Answer, Span
from mlpsych.documents import Document
from mlpsych.normalize.answers import item_key
from mlpsych.pipeline.context import StageContext
from mlpsych.pipeline.records import Level, LevelSize, Unit, UnitAnswers
from mlpsych.pipeline.result import isolated
from mlpsych.progress import ProgressEvent
from mlpsych.reading import released
from mlpsych.reading.merge import combine, merge_spans
from mlpsych.registry import Registry
from mlpsych.settings import AnswerSettings, RunSettings

# One model's spans -> its answers (``merge``: the template's choice to merge overlapping spans); keyed by
# ``AnswerSettings.rules``.
MergingRule = Callable[[Document, list[Span], bool, AnswerSettings], list[Answer]]
MERGING_RULES: Registry[MergingRule] = Registry("merging rule")
MERGING_RULES.register("mlpsych")(lambda doc, spans, merge, rules: merge_spans(doc, spans, merge=merge))
MERGING_RULES.register("released")(
    lambda doc, spans, merge, rules: released.released_answers(doc, spans, merge=merge, read=rules.read))

# Several models' spans and answer lists -> one list; keyed by ``AnswerSettings.models``.
ModelCombiner = Callable[[Document, dict[str, list[Span]], dict[str, list[Answer]], bool], list[Answer]]
MODEL_COMBINERS: Registry[ModelCombiner] = Registry("way of combining models")
MODEL_COMBINERS.register("joint")(lambda doc, spans, per_model, merge: combine(doc, spans, merge=merge))
MODEL_COMBINERS.register("union")(lambda doc, spans, per_model, merge: released.union_of_models(per_model))


def model_answers(unit: Unit, spans: list[Span], rules: AnswerSettings) -> list[Answer]:
    """One model's answers: the released code's per-entity cut for a sub-question, if asked for, else the
    merging rules chosen."""
    if unit.query.bridge_entity is not None and rules.per_entity:
        return released.per_entity_answers(unit.doc, spans, keep=rules.per_entity)
    return MERGING_RULES.get(rules.rules)(unit.doc, spans, unit.question.merge, rules)


def fold_entities(answers: list[Answer]) -> list[Answer]:
    """One answer per entity: answers whose texts name one entity written differently (``item_key``: case, hyphens
    and spacing between words, a final plural s) become the best-supported of them (most models, then most raw
    spans, then the higher score, then the earlier), which keeps its text, offsets, page and evidence and takes the
    highest score, every model and every span; at the place of the group's first answer."""
    groups: dict[str, list[Answer]] = {}
    for answer in answers:
        groups.setdefault(item_key(answer.text), []).append(answer)
    out = []
    for group in groups.values():
        best = min(group, key=lambda a: (-len(a.models), -len(a.spans), -a.score, group.index(a)))
        for other in group:
            if other is best:
                continue
            # new lists, not extended ones: a combined row's lists may be a per-model row's
            best.models = best.models + [m for m in other.models if m not in best.models]
            best.spans = best.spans + other.spans
            best.score = max(best.score, other.score)
        out.append(best)
    return out


def unit_answers(unit: Unit, rules: AnswerSettings) -> UnitAnswers:
    """Per-model answer rows and, for several models, the combined rows, the final ones marked; an entity
    question's final rows folded by entity where the settings say so (``AnswerSettings.fold``)."""
    spans = unit.read_spans()
    fold = rules.fold == "entity" and unit.question.kind == "entity"
    per_model = {m: model_answers(unit, s, rules) for m, s in spans.items()}
    if fold and len(spans) == 1:  # the model's own list is the final one
        per_model = {m: fold_entities(answers) for m, answers in per_model.items()}
    rows = [a for answers in per_model.values() for a in answers]
    if len(spans) > 1:
        combined = MODEL_COMBINERS.get(rules.models)(unit.doc, spans, per_model, unit.question.merge)
        if fold:
            combined = fold_entities(combined)
        for a in combined:
            a.ensemble = True
        rows += combined
        final = combined
    else:
        final = rows
    for a in final:
        a.final = True
    return UnitAnswers(unit, per_model, rows)


class MergeStage:
    """Answers from every unit's spans (a unit nothing was read for has none); rows go to the run's answers."""

    name = "merge"

    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        return []  # no model: nothing a front end waits for

    def run(self, level: Level, ctx: StageContext) -> None:
        for unit in level.units:
            if not unit.spans:
                continue
            with isolated(ctx.result, unit.doc.id, f"merging {unit.question.id}"):
                answered = unit_answers(unit, self.settings.answers)
                ctx.result.answers.extend(answered.rows)
                level.answered.append(answered)
