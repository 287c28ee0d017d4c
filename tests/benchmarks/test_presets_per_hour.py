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


@pytest.mark.slow
def test_each_preset_is_measured_against_a_matrix_product_in_the_dtype_it_reads(tmp_path: Path, monkeypatch,
                                                                                  capsys) -> None:
    import json

    from mlpsych.models import dtype_name

    papers = {f"p{i}": " ".join(f"Study {i} fitted a random forest in R on {n} participants." for n in range(40))
              for i in range(2)}
    (tmp_path / "text.json").write_text(json.dumps(json.dumps(papers)), encoding="utf-8")
    gold = {"q1": {p: [{"start": 13, "end": 26, "text": "random forest"}] for p in papers}}
    (tmp_path / "answers_dev.json").write_text(json.dumps(gold), encoding="utf-8")
    monkeypatch.setattr("sys.argv", ["presets_per_hour.py", "--data", str(tmp_path), "--papers", "1", "--presets",
                                     "fast,reference", "--size", "tiny", "--work", str(tmp_path / "models"),
                                     "--sub-questions", "1", "--matmul-size", "256",
                                     "--json", str(tmp_path / "figures.json"), "--answers", str(tmp_path / "a.jsonl")])
    presets_per_hour.main()
    printed = capsys.readouterr().out
    fast, reference = dtype_name("auto", "cpu"), "float32"
    products = [line for line in printed.splitlines() if line.startswith("matrix product in this process")]
    assert len(products) == len({fast, reference})
    assert {line.split(", ")[1].split(")")[0] for line in products} == {fast, reference}
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert set(figures["matmul_tflops"]) == {fast, reference}
    for preset, dtype in (("fast", fast), ("reference", reference)):
        row = figures["presets"][preset]["1"]
        assert row["dtype"] == dtype
        assert row["share"] == pytest.approx(row["tflops_per_s"] / figures["matmul_tflops"][dtype])
    # the answers, to compare two checkouts' runs: each preset's, with where they lie in the paper
    answers = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert {a["preset"] for a in answers} == {"fast", "reference"}
    located = [a for a in answers if a["start"] is not None]
    assert located and all(papers[a["doc"]][a["start"]:a["end"]] == a["text"] for a in located)
