"""`mlpsych run` end to end with tiny models on examples/, and the errors a user can make."""

from __future__ import annotations

import json
import shutil

import pytest
from openpyxl import load_workbook

from mlpsych.cli import main
from mlpsych.ingest import load_documents


def run_cli(*args) -> int:
    return main(["run", *map(str, args), "--no-progress", "--max-length", "256", "--stride", "64"])


@pytest.mark.slow
def test_examples_to_spreadsheet_and_rerun_from_cache(examples_dir, tiny_questions, tmp_path, capsys):
    out = tmp_path / "results.xlsx"
    cache = tmp_path / "cache"
    papers = sorted((examples_dir / "papers").glob("*.txt"))
    assert len(papers) >= 3
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", out, "--cache", cache,
                   "--max-sub-questions", "2") == 0

    wb = load_workbook(out)
    assert {"papers", "answers", "run"} <= set(wb.sheetnames)
    sheet = wb["papers"]
    header = [c.value for c in sheet[1]]
    assert header[:3] == ["paper_id", "source_file", "status"] and header[3:] == ["q1", "q2", "q3", "q4"]
    rows = list(sheet.iter_rows(min_row=2, values_only=True))
    assert sorted(r[0] for r in rows) == sorted(p.stem for p in papers)
    assert all(r[2] == "ok" and r[3] for r in rows)  # every paper has q1 answers

    answers = wb["answers"]
    head = [c.value for c in answers[1]]
    for column in ("paper_id", "question_id", "answer", "stage", "models", "score", "start", "end", "page", "evidence",
                   "correct", "corrected_answer", "notes"):
        assert column in head
    texts = {d.id: d.text for d in load_documents(examples_dir / "papers", progress=False)}
    records = [dict(zip(head, r)) for r in answers.iter_rows(min_row=2, values_only=True)]
    assert {r["question_id"] for r in records} >= {"q1", "q3", "q4"}
    for r in records:
        if r["stage"] == "extractive":
            assert r["answer"] == " ".join(texts[r["paper_id"]][r["start"] : r["end"]].split())
            assert r["answer"] in r["evidence"] and r["page"] == 1
    q4 = [r for r in records if r["question_id"] == "q4"]
    assert all(r["bridge_entity"] and r["bridge_entity"] in r["question"] for r in q4)
    run_sheet = dict(wb["run"].iter_rows(min_row=2, values_only=True))
    assert run_sheet["transformers"].startswith("5.") and int(run_sheet["windows_read"]) > 0

    # A second run reads nothing: every result comes from the cache, and the spreadsheet is the same.
    again = tmp_path / "again.jsonl"
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", again, "--cache", cache,
                   "--max-sub-questions", "2") == 0
    lines = [json.loads(line) for line in again.read_text().splitlines()]
    finals = [(r["paper_id"], r["question_id"], r["answer"]) for r in lines if r["final"] or r["stage"] == "ungrounded"]
    assert sorted(finals) == sorted((r["paper_id"], r["question_id"], r["answer"]) for r in records)
    capsys.readouterr()
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", tmp_path / "r.csv", "--cache",
                   cache, "--max-sub-questions", "2") == 0
    header = (tmp_path / "r.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("paper_id,source_file,question_id,question,answer,stage,models")


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("mlpsych: error:")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err)
    return errors[0]


def test_missing_folder(tmp_path, capsys):
    assert run_cli(tmp_path / "nope", "--out", tmp_path / "r.xlsx") == 2
    assert "nope" in one_line_error(capsys)


def test_empty_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert run_cli(tmp_path / "empty", "--out", tmp_path / "r.xlsx") == 2
    one_line_error(capsys)


def test_malformed_question_file(examples_dir, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("questions:\n  - id: q1\n    text: What?\n    models: []\n")
    assert run_cli(examples_dir / "papers", "--questions", bad, "--out", tmp_path / "r.xlsx") == 2
    line = one_line_error(capsys)
    assert "bad.yaml" in line and "q1" in line and "models" in line


def test_bad_output_name(examples_dir, tmp_path, capsys):
    assert run_cli(examples_dir / "papers", "--out", tmp_path / "r.docx") == 2
    one_line_error(capsys)


@pytest.mark.slow
def test_unknown_model_is_one_line_and_keeps_other_work(examples_dir, tiny_models, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    questions = tmp_path / "q.yaml"
    questions.write_text(
        "questions:\n"
        f"  - id: good\n    text: What methods were used?\n    models: ['{tiny_models['bert']}']\n"
        "  - id: bad\n    text: What software was used?\n    models: [nobody/no-such-model-squad2]\n"
    )
    papers = tmp_path / "papers"
    shutil.copytree(examples_dir / "papers", papers)
    cache = tmp_path / "cache"
    assert run_cli(papers, "--questions", questions, "--out", tmp_path / "r.xlsx", "--cache", cache) == 2
    line = one_line_error(capsys)
    assert "nobody/no-such-model-squad2" in line
    # The good question's work is cached: answering it alone now loads nothing new.
    from mlpsych.cache import ResultCache

    assert len(ResultCache(cache)) == len(list(papers.glob("*.txt")))
