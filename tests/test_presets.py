"""Named presets (paper / fast): what they change in questions and settings, and the CLI flags over them."""

from __future__ import annotations

import argparse

import pytest

from mlpsych.questions import load_question_set
from mlpsych.errors import UnknownChoice, UserError
from mlpsych.settings import PRESETS, ReaderSettings, RunSettings, apply_preset, get_preset, substitute_models


def test_fast_preset_reads_each_question_with_one_base_reader_behind_a_small_one():
    questions = load_question_set("mlpsych")
    settings = RunSettings(reader=ReaderSettings(stride=64), max_sub_questions=7)
    new_q, new_s = apply_preset("fast", questions, settings)
    models = {q.id: q.models for q in new_q.questions}
    assert models["q1"] == ["deepset/deberta-v3-base-squad2"]  # the two-model ensembles collapse to one reader
    assert models["q2"] == ["deepset/electra-base-squad2"]
    assert models["q3"] == ["deepset/deberta-v3-base-squad2"]
    assert models["q4"] == ["deepset/deberta-v3-base-squad2"]
    assert new_s.retrieval.read == "retrieve" and new_s.retrieval.mode == "bm25"
    # A cascade: the small reader's spans choose the base readers' windows, ranked with the templates' signals.
    assert new_s.retrieval.cascade.model == "deepset/minilm-uncased-squad2"
    assert new_s.retrieval.cascade.fuse == "signals" and 0 < new_s.retrieval.cascade.mass < 1
    assert new_s.preset == "fast"
    # Everything else is kept, and the inputs are not modified.
    assert new_s.reader.stride == 64 and new_s.max_sub_questions == 7
    assert questions.get("q1").models[0] == "deepset/deberta-v3-large-squad2"
    assert settings.retrieval.read == "template" and settings.preset is None


def test_paper_preset_reads_everything_with_the_templates_models():
    questions = load_question_set("mlpsych")
    new_q, new_s = apply_preset(PRESETS["paper"], questions)
    assert [q.models for q in new_q.questions] == [q.models for q in questions.questions]
    assert new_s.retrieval.read == "all" and new_s.preset == "paper"


def test_substitution_that_makes_a_duplicate_reads_the_model_once():
    questions = load_question_set("mlpsych")
    same = {"deepset/deberta-v3-large-squad2": "x/base", "ahotrod/albert_xxlargev1_squad2_512": "x/base"}
    assert substitute_models(questions, same).get("q1").models == ["x/base"]


def test_unknown_preset_is_a_one_line_error():
    with pytest.raises(UnknownChoice, match="unknown preset 'turbo' .*paper, fast"):
        get_preset("turbo")


def test_a_refused_value_names_the_setting_in_one_line():
    from mlpsych.errors import SettingsError
    from mlpsych.settings import build_settings

    with pytest.raises(SettingsError) as refused:
        build_settings(load_question_set("mlpsych"), "fast", given={"reader": {"stride": -3}})
    assert refused.value.field == "reader.stride" and refused.value.value == -3
    assert str(refused.value).startswith("setting reader.stride: Input should be greater than or equal to 0")
    assert "\n" not in str(refused.value)


def _args(**given) -> argparse.Namespace:
    from mlpsych.cli import run_cmd

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    run_cmd.add_parser(sub)
    argv = ["run", "papers"]
    for key, value in given.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return parser.parse_args(argv)


def test_cli_flags_override_the_preset():
    from mlpsych.cli.run_cmd import settings_from_args

    questions = load_question_set("mlpsych")

    def settings(**given):
        return settings_from_args(_args(**given), questions)[1]

    plain = settings()
    assert plain.retrieval.read == "template" and plain.preset is None  # the templates decide (paper's default)
    fast_questions, fast = settings_from_args(_args(preset="fast"), questions)
    assert fast.retrieval == PRESETS["fast"].retrieval and fast.preset == "fast"
    assert (fast_questions, fast) == apply_preset("fast", questions)  # the CLI applies presets as the library does
    tuned = settings(preset="fast", budget=5, retrieval="dense", no_entity_anchor=True)
    assert (tuned.retrieval.budget, tuned.retrieval.mode, tuned.retrieval.entity_anchor) == (5, "dense", False)
    assert settings(preset="fast", read="all").retrieval.read == "all"
    assert settings(read="retrieve").retrieval.read == "retrieve"
    earlier = settings(preset="fast", small_reader="none").retrieval  # BM25 and signals alone, as before the cascade
    assert earlier.cascade.model is None and (earlier.entity_budget, earlier.entity_extra) == (2, 1)
    assert settings(read="retrieve", small_reader="my/minilm").retrieval.cascade.model == "my/minilm"
    with pytest.raises(UserError, match="--budget 0: Input should be greater than or equal to 1"):
        settings(budget=0)
    with pytest.raises(UserError, match="--neighbours 9: "):
        settings(neighbours=9)


def test_cli_takes_every_default_from_the_settings():
    """A flag left out keeps the settings' default: the reader's batch size stays open (chosen per device)."""
    from mlpsych.cli.run_cmd import settings_from_args

    assert settings_from_args(_args(), load_question_set("mlpsych"))[1] == RunSettings()
    given = settings_from_args(_args(batch_size=2, dtype="fp32", no_normalize=True), load_question_set("mlpsych"))[1]
    assert (given.reader.batch_size, given.reader.dtype, given.llm.enabled) == (2, "fp32", False)


def test_cli_offers_every_preset():
    from mlpsych.cli import run_cmd

    parser = argparse.ArgumentParser()
    run_cmd.add_parser(parser.add_subparsers())
    action = next(a for a in parser._subparsers._group_actions[0].choices["run"]._actions if a.dest == "preset")
    assert sorted(action.choices) == sorted(PRESETS)


def test_reference_preset_sets_the_pipelines_reading_the_released_answers_and_template_fields():
    from mlpsych.cli.run_cmd import settings_from_args

    questions = load_question_set("mlpsych")
    new_q, ref = apply_preset("reference", questions, RunSettings(reader=ReaderSettings(batch_size=2)))
    r = ref.reader
    assert (r.max_length, r.stride, r.layout, r.max_answer_tokens, r.search, r.dtype) == (
        384, 128, "per_question", 15, "pipeline", "fp32")
    assert r.snap_to_words and r.keep_blank_tokens and not r.dedupe and r.batch_size == 2  # others kept
    assert r.same_text == "summed" and ReaderSettings().same_text == "summed"  # the default reads so too
    _, fast = apply_preset("fast", questions, RunSettings())
    assert fast.reader.same_text == "kept" and fast.answers.read == 20  # the reading its cascade was measured with
    assert (ref.answers.rules, ref.answers.models, ref.answers.per_entity, ref.answers.read) == (
        "released", "union", 3, 20)
    assert ref.retrieval.read == "all" and ref.max_sub_questions >= 1000
    assert {q.id: (q.top_k, q.merge, q.allow_empty) for q in new_q.questions} == {
        "q1": (30, True, False), "q2": (30, True, False), "q3": (30, True, False), "q4": (5, False, False)}
    assert questions.get("q4").top_k == 5 and not questions.get("q2").allow_empty
    # the command line applies it as the library does, and an explicit flag still wins
    assert settings_from_args(_args(preset="reference"), questions) == (new_q, ref.model_copy(
        update={"reader": r.model_copy(update={"batch_size": None})}))
    assert settings_from_args(_args(preset="reference", dtype="bf16"), questions)[1].reader.dtype == "bf16"
