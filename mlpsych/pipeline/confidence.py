"""The confidence stage: each final answer's calibrated probability that a coder marks it correct, and the one
policy of which calibrators a run uses (:func:`run_calibrators`: the stage and ``mlpsych run``'s check before
reading both call it, so what is checked is what is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mlpsych.coding.confidence import Calibrator, CalibratorError, add_confidence
from mlpsych.coding.crossfit import reader_calibrator
from mlpsych.pipeline.context import StageContext
from mlpsych.pipeline.records import Level, LevelSize
from mlpsych.progress import ProgressEvent
from mlpsych.questions import QuestionSet
from mlpsych.settings import RunSettings


@dataclass(frozen=True)
class OwnCalibrator:
    """A reader folder's own calibrator (``mlpsych adapt`` writes it) and the questions that folder alone reads."""

    reader: str
    path: Path
    calibrator: Calibrator
    questions: list[str]


@dataclass(frozen=True)
class RunCalibrators:
    """The run's calibrators, loaded: ``run`` for every answer of a question without an own one; ``named`` is the
    file the run named (None: the shipped default)."""

    run: Calibrator
    named: str | None = None
    own: list[OwnCalibrator] = field(default_factory=list)

    @property
    def by_question(self) -> dict[str, Calibrator]:
        """Question id -> its own calibrator, for the questions that have one."""
        return {q: own.calibrator for own in self.own for q in own.questions}

    def describe(self) -> str:
        """The run sheet's record: the named file or the default's description, then each question's own file."""
        first = self.named or "default: " + self.run.fitted_on.get("description", "development papers")
        own = sorted((q, str(o.path)) for o in self.own for q in o.questions)
        return "; ".join([first] + [f"{q}: {path}" for q, path in own])


def run_calibrators(settings: RunSettings, questions: QuestionSet) -> RunCalibrators:
    """Which calibrators a run over ``questions`` uses, loaded: the one ``settings`` name (``--calibrator``) for
    every answer; else the shipped default, and for the questions read by exactly one reader folder that carries
    a calibrator (:func:`~mlpsych.coding.crossfit.reader_calibrator`), that one. Reader folders' calibrators are
    neither used nor read when the run names one. Raises CalibratorError naming the file that is not a calibrator
    (and, for a reader's own, the folder and the questions it would calibrate)."""
    named = settings.answers.calibrator
    try:
        run = Calibrator.load(named)
    except CalibratorError as error:
        raise CalibratorError(f"--calibrator: {error}" if named else str(error)) from None
    if named:
        return RunCalibrators(run, named)
    by_reader: dict[str, list[str]] = {}
    for q in questions.questions:
        if len(q.models) == 1:
            by_reader.setdefault(q.models[0], []).append(q.id)
    own = []
    for reader, ids in by_reader.items():
        path = reader_calibrator(reader)
        if path is None:
            continue
        try:
            own.append(OwnCalibrator(reader, path, Calibrator.load(path), ids))
        except CalibratorError as error:
            raise CalibratorError(
                f"reader folder {reader}, the calibrator of its answers to {', '.join(ids)}: {error} (fix or remove "
                f"{path}, or name a calibrator for the run with --calibrator)") from None
    return RunCalibrators(run, None, own)


class ConfidenceStage:
    """The level's final answers get their ``confidence`` (its features are within a paper's question, so a level
    at a time is the whole run's answer), each from the calibrator :func:`run_calibrators` gives its question,
    loaded at the stage's first level; the run sheet names the calibrators."""

    name = "confidence"

    def __init__(self, settings: RunSettings, questions: QuestionSet) -> None:
        self.settings = settings
        self.questions = questions  # every question of the run
        self.kinds = {q.id: q.kind for q in questions.questions}
        # an answer's agreement is a share of its question's readers: never of what other papers' answers had
        self.readers = {q.id: len(set(q.models)) for q in questions.questions}
        self._calibrators: RunCalibrators | None = None

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        return []  # no model: nothing a front end waits for

    def run(self, level: Level, ctx: StageContext) -> None:
        if self._calibrators is None:
            self._calibrators = run_calibrators(self.settings, self.questions)
        calibrators = self._calibrators
        add_confidence(ctx.result.answers[level.first_row:], {d.id: d.text for d in level.docs}, self.kinds,
                       calibrators.run, calibrators.by_question, self.readers)
        ctx.result.info.calibrator = calibrators.describe()
