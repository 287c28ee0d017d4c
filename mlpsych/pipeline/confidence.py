"""The confidence stage: each final answer's calibrated probability that a coder marks it correct."""

from __future__ import annotations

from mlpsych.coding.confidence import Calibrator, add_confidence
from mlpsych.pipeline.context import StageContext
from mlpsych.pipeline.records import Level, LevelSize
from mlpsych.progress import ProgressEvent
from mlpsych.settings import RunSettings


class ConfidenceStage:
    """The level's final answers get their ``confidence`` (its features are within a paper's question, so a level
    at a time is the whole run's answer); the run sheet names the calibrator."""

    name = "confidence"

    def __init__(self, settings: RunSettings, kinds: dict[str, str]) -> None:
        self.settings = settings
        self.kinds = kinds  # question id -> kind, of every question of the run
        self._calibrator: Calibrator | None = None

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        return []  # no model: nothing a front end waits for

    def run(self, level: Level, ctx: StageContext) -> None:
        if self._calibrator is None:
            self._calibrator = Calibrator.load(self.settings.answers.calibrator)
        add_confidence(ctx.result.answers[level.first_row:], {d.id: d.text for d in level.docs}, self.kinds,
                       self._calibrator)
        ctx.result.info.calibrator = self.settings.answers.calibrator or "default: " + self._calibrator.fitted_on.get(
            "description", "development papers")
