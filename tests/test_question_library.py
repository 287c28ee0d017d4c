"""Every template in questions/ loads with the project's loader; the study-coding library is complete and marked."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlpsych.dev.tiny import HUB_TO_FAMILY
from mlpsych.questions import library_dir, load_question_set, load_question_sets

FILES = sorted(p for p in library_dir().iterdir() if p.suffix in (".yaml", ".yml", ".json"))


def test_library_is_there():
    assert {p.stem for p in FILES} >= {"mlpsych", "study-coding"}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_template_loads(path: Path):
    questions = load_question_set(path)
    assert questions.questions and questions.name == path.stem
    for q in questions.questions:
        assert q.text.endswith("?"), q.id
        if q.normalize:
            assert "{answers}" in q.normalize.prompt, q.id


def test_study_coding_covers_the_usual_items():
    library = load_question_set("study-coding")
    by_id = {q.id: q for q in library.questions}
    assert set(by_id) == {"sample_size", "participants", "country", "study_design", "data_source",
                          "outcome_measures", "effect_sizes", "preregistration"}
    assert all(q.experimental for q in library.questions)  # until measured on annotated data
    assert by_id["sample_size"].kind == "number" and by_id["country"].kind == "entity"
    assert by_id["preregistration"].allow_empty  # most papers say nothing about it
    for q in library.questions:
        assert q.models and all(m in HUB_TO_FAMILY for m in q.models), q.id  # SQuAD2 readers with tiny stand-ins
        assert q.description


def test_library_sets_combine_without_id_clashes():
    combined = load_question_sets([p for p in FILES])
    assert len(combined.questions) == sum(len(load_question_set(p).questions) for p in FILES)


@pytest.mark.slow
def test_study_coding_runs_end_to_end_with_tiny_models(tiny_models, tmp_path, examples_dir):
    """Every library question goes through the real pipeline (tiny stand-ins for its Hub readers)."""
    from mlpsych.cache import ResultCache
    from mlpsych.export import write_result
    from mlpsych.ingest import load_documents
    from mlpsych.pipeline import Pipeline
    from mlpsych.settings import LLMSettings, RunSettings, substitute_models

    library = load_question_set("study-coding")
    tiny = substitute_models(library, {hub: str(tiny_models[family]) for hub, family in HUB_TO_FAMILY.items()})
    docs = load_documents([examples_dir / "papers" / "burnout-survey-text.txt"], progress=False)
    result = Pipeline(tiny, RunSettings(llm=LLMSettings(enabled=False)), ResultCache(tmp_path / "cache"),
                      progress=False).run(docs)
    assert result.errors == {}
    answered = {a.question_id for a in result.answers if a.final}
    assert answered <= {q.id for q in library.questions}
    # questions that may not be left empty always get an answer
    assert {q.id for q in library.questions if not q.allow_empty} <= answered
    for a in result.answers:
        assert docs[0].text[a.start:a.end].split() == a.text.split() and a.page is None
    assert write_result(result, tmp_path / "coding.xlsx").stat().st_size > 0
