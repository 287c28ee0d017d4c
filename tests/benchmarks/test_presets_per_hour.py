"""benchmarks/presets_per_hour.py: a real architecture for every reader a preset names."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlpsych.dev.tiny import REAL_SIZES
from mlpsych.questions import load_question_set
from mlpsych.settings import PRESETS, RunSettings, apply_preset
from tests.benchmarks.scripts import load_script

presets_per_hour = load_script("presets_per_hour")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_reader_of_a_preset_has_its_real_architecture(preset: str) -> None:
    questions, settings = apply_preset(preset, load_question_set("mlpsych"), RunSettings())
    named = {m for q in questions.questions for m in q.models} | ({settings.retrieval.cascade.model} - {None})
    assert named <= set(presets_per_hour.ARCHITECTURES)
    assert {presets_per_hour.ARCHITECTURES[m] for m in named} <= set(REAL_SIZES)


def test_the_built_readers_fill_every_slot(tmp_path: Path) -> None:
    models = {m: f"/built/{i}" for i, m in enumerate(presets_per_hour.ARCHITECTURES)}
    questions, settings = presets_per_hour.configured("fast", models, "cpu", "fp32", None, 3)
    assert {m for q in questions.questions for m in q.models} <= set(models.values())
    assert settings.retrieval.cascade.model in models.values() and not settings.llm.enabled
    assert questions.get("q4").max_sub_questions == 3 and settings.max_sub_questions == 3
    assert settings.reader.dtype == "fp32"
    # by default each preset keeps its own dtype: the reference reads in fp32 (its "every entity" capped too)
    _, reference = presets_per_hour.configured("reference", models, "cpu", "preset", None, 3)
    assert reference.reader.dtype == "fp32" and reference.max_sub_questions == 3
    _, paper = presets_per_hour.configured("paper", models, "cpu", "preset", None, 3)
    assert paper.reader.dtype == "auto"
