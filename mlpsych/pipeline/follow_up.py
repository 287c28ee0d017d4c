"""The follow-up stage: the units of a level, every question asked of every paper, and a bridged (multi-hop)
question asked once per entity its bridge question found in that paper (or, where a coder coded the bridge question
in that paper and the run keeps the coding, once per answer of the coding). A (paper, question) pair the kept
coding settles gets no unit: no later stage (read, merge, normalize, confidence) has anything of it to do."""

from __future__ import annotations

from mlpsych.answers import Answer
from mlpsych.documents import Document
from mlpsych import multihop
from mlpsych.pipeline.context import StageContext
from mlpsych.pipeline.normalize import answer_stages
from mlpsych.pipeline.records import Level, LevelSize, Unit
from mlpsych.pipeline.result import isolated
from mlpsych.progress import ProgressEvent
from mlpsych.questions import QuestionTemplate
from mlpsych.reading.reader import Query
from mlpsych.retrieval import cascade, plan_for
from mlpsych.settings import RunSettings


class FollowUpStage:
    """Units for a level: one per paper and question, one per bridge entity for a bridged question (found among
    the final answers of earlier levels, or the coding's answers where the run keeps a coder's coding of them)."""

    name = "follow_up"

    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        return []  # no model: nothing a front end waits for

    def run(self, level: Level, ctx: StageContext) -> None:
        left_out: dict[str, dict[str, int]] = {}  # question id -> paper id -> bridge entities not asked about
        finals: dict[tuple[str, str], list[Answer]] = {}
        for a in ctx.result.answers:
            if a.final:
                finals.setdefault((a.doc_id, a.question_id), []).append(a)
        earlier = {(u.doc.id, u.question.id): u for done in ctx.levels if done is not level for u in done.units}
        for doc in level.docs:
            for q in level.questions:
                if ctx.settled.covers(doc.id, q.id):  # its coded rows stand in the sheet: nothing to read
                    continue
                if not q.bridge_from:
                    level.units.append(Unit(doc, q, self.query(q, q.text)))
                    continue
                with isolated(ctx.result, doc.id, f"multi-hop {q.id}"):
                    coded = ctx.settled.bridges.of(q.id, doc.id)
                    if coded is None:
                        own = self.found(finals.get((doc.id, q.bridge_from), []))
                        units, dropped = self.sub_units(doc, q, own, self.cap(q))
                    else:  # a coder's answers to the bridge question (run --keep-coding), in the coded sheet's order
                        found = multihop.distinct(coded, self.settings.answers.entity_case)
                        units, dropped = self.sub_units(doc, q, found, None)
                        ctx.result.info.coded_entities += len(found)
                    if dropped:
                        left_out.setdefault(q.id, {})[doc.id] = dropped
                    source = earlier.get((doc.id, q.bridge_from))  # none where the coding settled it: not read
                    if source is not None and self.settings.retrieval.cascade.bridge_windows == "source":
                        for unit in units:
                            unit.source = source_windows(unit, source.chosen)
                    level.units.extend(units)
        for q in level.questions:
            if q.id in left_out:
                ctx.result.info.add_capped(q.id, {"cap": self.cap(q), "bridge_from": q.bridge_from,
                                                  "papers": left_out[q.id]})

    def query(self, question: QuestionTemplate, text: str, entity: str | None = None) -> Query:
        return Query(
            question_id=question.id,
            text=text,
            top_k=question.top_k,
            max_answer_tokens=self.settings.reader.max_answer_tokens or question.answer_tokens,
            allow_empty=question.allow_empty,
            bridge_entity=entity,
        )

    def cap(self, question: QuestionTemplate) -> int:
        """Sub-questions asked per paper: ``--max-sub-questions``, else the template's ``max_sub_questions``."""
        return self.settings.max_sub_questions or question.max_sub_questions

    def found(self, bridge: list[Answer]) -> list[str]:
        """The entities the run's own final answers to the bridge question give, best first."""
        return multihop.ranked_entities(bridge, self.settings.answers.entity_case, answer_stages(self.settings))

    def sub_units(self, doc: Document, question: QuestionTemplate, found: list[str],
                  cap: int | None) -> tuple[list[Unit], int]:
        """One unit per bridge entity of this paper (the multi-hop step), the first ``cap`` of ``found`` (all of
        them for None: a coder's list, chosen whole; the cap bounds the cost of the run's own, noisier answers), and
        how many entities the cap left out."""
        cap = len(found) if cap is None else cap
        retrieving = plan_for(question.retrieval, self.settings.retrieval) is not None
        entities = multihop.entities_to_ask(question, found[:cap], retrieving)
        units = [Unit(doc, question, self.query(question, text, entity))
                 for entity, text in multihop.sub_questions(question, entities)]
        return units, max(len(found) - cap, 0)


def source_windows(unit: Unit, chosen: dict[str, cascade.Ranges]) -> dict[str, cascade.Ranges]:
    """Per reader of the sub-question that read its bridge's source question, the windows chosen there that name
    its entity (``bridge_windows: source``); a reader for which none does is left out, and reads as before."""
    found = {m: cascade.naming(unit.doc, chosen[m], unit.query.bridge_entity or "")
             for m in unit.question.models if m in chosen}
    return {m: ranges for m, ranges in found.items() if ranges}
