"""Runs the stages over a corpus: follow-up -> sizing -> select -> read -> merge -> normalize -> confidence,
level by level, with caching and progress (see :mod:`mlpsych.pipeline.core` and docs/architecture.md)."""

from mlpsych.pipeline.core import Pipeline, Stage, question_levels
from mlpsych.pipeline.read import READER_VERSION
from mlpsych.pipeline.records import Settled
from mlpsych.pipeline.result import RunInfo, RunResult, isolated

__all__ = ["READER_VERSION", "Pipeline", "RunInfo", "RunResult", "Settled", "Stage", "isolated", "question_levels"]
