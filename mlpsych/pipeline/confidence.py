"""The confidence stage: each final answer's calibrated probability that a coder marks it correct."""

from __future__ import annotations

from mlpsych.coding.confidence import Calibrator, add_confidence
from mlpsych.coding.crossfit import reader_calibrator
from mlpsych.pipeline.context import StageContext
from mlpsych.pipeline.records import Level, LevelSize
from mlpsych.progress import ProgressEvent
from mlpsych.questions import QuestionSet
from mlpsych.settings import RunSettings


class ConfidenceStage:
    """The level's final answers get their ``confidence`` (its features are within a paper's question, so a level
    at a time is the whole run's answer); the run sheet names the calibrator. A question read by one reader
    folder that carries its own calibrator (``mlpsych adapt`` writes one) is calibrated by it, unless the run
    names a calibrator."""

    name = "confidence"

    def __init__(self, settings: RunSettings, questions: QuestionSet) -> None:
        self.settings = settings
        self.kinds = {q.id: q.kind for q in questions.questions}  # of every question of the run
        own = {} if settings.answers.calibrator else {
            q.id: reader_calibrator(q.models[0]) for q in questions.questions if len(q.models) == 1}
        self._own = {q: path for q, path in own.items() if path is not None}
        self._calibrators: tuple[Calibrator, dict[str, Calibrator]] | None = None

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        return []  # no model: nothing a front end waits for

    def run(self, level: Level, ctx: StageContext) -> None:
        if self._calibrators is None:
            self._calibrators = (Calibrator.load(self.settings.answers.calibrator),
                                 {q: Calibrator.load(path) for q, path in self._own.items()})
        default, own = self._calibrators
        add_confidence(ctx.result.answers[level.first_row:], {d.id: d.text for d in level.docs}, self.kinds,
                       default, own)
        named = self.settings.answers.calibrator or "default: " + default.fitted_on.get("description",
                                                                                       "development papers")
        ctx.result.info.calibrator = "; ".join([named] + [f"{q}: {path}" for q, path in sorted(self._own.items())])
