"""`mlpsych run` end to end with tiny models on examples/, and the errors a user can make."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from openpyxl import load_workbook


from mlpsych.cli import main
from mlpsych.coding.adapt import META_FILE
from mlpsych.coding.confidence import Calibrator
from mlpsych.coding.crossfit import CALIBRATOR_FILE
from mlpsych.dev.synth import pdf_with_a_page_without_text
from mlpsych.ingest import load_documents
from mlpsych.provenance import version


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
    assert header[:3] == ["paper_id", "source_file", "status"] and header[3:] == ["q1", "q2", "q3", "q4", "text_notes"]
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
            assert r["answer"] in r["evidence"] and r["page"] is None  # a .txt has no pages: the cell is blank
    q4 = [r for r in records if r["question_id"] == "q4"]
    assert all(r["bridge_entity"] and r["bridge_entity"] in r["question"] for r in q4)
    summary = capsys.readouterr().out
    assert re.search(rf"{len(papers)} papers, \d+ answers -> .*results.xlsx in \d+ (s|min)", summary)
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
    assert header.endswith(",correct,corrected_answer,notes")  # a CSV is a coding form too
    # ... which `mlpsych eval` (and adapt, agree, calibrate) read back: the run's final answers, as its JSONL has them
    from mlpsych.evaluation.evaluate import load_predictions

    def spans(rows):
        return sorted((r["paper_id"], r["question_id"], r["answer"], r["start"], r["end"]) for r in rows)

    in_sheets = [r for r in lines if r["final"] or r["stage"] == "ungrounded"]  # as the answers sheet holds them
    assert spans(load_predictions(tmp_path / "r.csv")) == spans(in_sheets)


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


def test_missing_models_are_named_at_once_before_any_paper_is_read(examples_dir, tiny_models, tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    questions = tmp_path / "q.yaml"
    gone = tmp_path / "no-folder"
    questions.write_text(
        "questions:\n"
        f"  - id: good\n    text: What methods were used?\n    models: ['{tiny_models['bert']}']\n"
        "  - id: bad\n    text: What software was used?\n    models: [nobody/no-such-model-squad2]\n"
        f"  - id: worse\n    text: Which data?\n    models: ['{gone}']\n"
        "    normalize:\n      prompt: '{answers}'\n"
    )
    read = []
    monkeypatch.setattr("mlpsych.cli.ingest_cmd.load_documents", lambda *a, **k: read.append(a) or [])
    assert run_cli(examples_dir / "papers", "--questions", questions, "--out", tmp_path / "r.xlsx",
                   "--llm", tmp_path / "no-llm") == 2
    err = capsys.readouterr().err
    assert err.count("mlpsych: error:") == 1 and "Traceback" not in err
    for missing in ("nobody/no-such-model-squad2", str(gone), str(tmp_path / "no-llm")):
        assert missing in err
    assert str(tiny_models["bert"]) not in err
    assert "mlpsych dev tiny-models" in err and read == []  # the ways forward; no paper was read


def reader_with_calibrator(tiny_models, folder: Path, calibrator: str, adapted_on: list[str] = ()) -> Path:
    """A copy of the tiny reader carrying ``calibrator`` as its calibrator.json (as `mlpsych adapt` leaves one),
    marked as adapted on ``adapted_on``."""
    shutil.copytree(tiny_models["bert"], folder)
    (folder / CALIBRATOR_FILE).write_text(calibrator)
    if adapted_on:
        section = {"base_reader": str(tiny_models["bert"]), "papers": ["A", "B"], "records": 40,
                   "questions": {q: {"positive": 20} for q in adapted_on}, "options": {"min_answers": 16}}
        (folder / META_FILE).write_text(json.dumps({"adapted": section}))
    return folder


@pytest.mark.parametrize("broken", ["{not json", "text"], ids=["not-json", "text-for-numbers"])
def test_a_broken_calibrator_of_a_models_folder_fails_before_any_paper_is_read(examples_dir, tiny_models, tmp_path,
                                                                                capsys, monkeypatch, broken):
    """"text": a calibrator whose means are text (a shared folder's file edited or crafted) passed the check and
    stopped the run after every paper was read, as a bug."""
    from mlpsych.coding.confidence import Calibrator

    calibrator = json.loads(Calibrator.load().to_json())
    calibrator["mean"] = ["x"] * len(calibrator["mean"])
    reader = reader_with_calibrator(tiny_models, tmp_path / "reader",
                                    broken if broken.startswith("{") else json.dumps(calibrator))
    questions = tmp_path / "q.yaml"
    questions.write_text(
        "questions:\n"
        f"  - id: methods\n    text: What methods were used?\n    models: ['{reader}']\n"
        f"  - id: software\n    text: What software was used?\n    models: ['{reader}']\n"
        f"  - id: both\n    text: Which data?\n    models: ['{reader}', '{tiny_models['roberta']}']\n")
    read = []
    monkeypatch.setattr("mlpsych.cli.ingest_cmd.load_documents", lambda *a, **k: read.append(a) or [])
    assert run_cli(examples_dir / "papers", "--questions", questions, "--out", tmp_path / "r.xlsx", "--no-normalize",
                   "--cache", tmp_path / "cache") == 2
    assert read == [] and not (tmp_path / "r.xlsx").exists()  # no paper was read
    line = one_line_error(capsys)
    assert f"reader folder {reader}" in line and str(reader / CALIBRATOR_FILE) in line and "--calibrator" in line
    assert "methods, software:" in line and "both" not in line  # the questions it would calibrate (alone read)


@pytest.mark.slow
def test_a_named_calibrator_is_used_and_adapted_readers_own_ones_are_not_checked(examples_dir, tiny_models,
                                                                                  tiny_questions, tmp_path):
    adapted = reader_with_calibrator(tiny_models, tmp_path / "adapted", "[]", adapted_on=["q1"])
    good = tmp_path / "good.json"
    Calibrator.load().save(good)
    out = tmp_path / "r.xlsx"
    assert run_cli(examples_dir / "papers" / "online-course-dropout.txt", "--questions", tiny_questions, "--only",
                   "q1", "--adapted", adapted, "--calibrator", good, "--no-normalize", "--out", out, "--cache",
                   tmp_path / "cache") == 0
    run_sheet = dict(load_workbook(out)["run"].iter_rows(min_row=2, values_only=True))
    assert run_sheet["calibrator"] == str(good) and str(adapted) in str(run_sheet["adapted_readers"])


def test_unwritable_output_fails_before_reading(examples_dir, tiny_questions, tmp_path, capsys):
    (tmp_path / "file.txt").write_text("a file, not a folder")
    cache = tmp_path / "cache"
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", tmp_path / "file.txt" / "r.xlsx",
                   "--cache", cache) == 2
    assert "file.txt" in one_line_error(capsys) and not cache.exists()  # nothing was read or cached


def test_bad_choices_and_unknown_presets_are_one_line(tmp_path, capsys):
    for args in (["--preset", "turbo"], ["--read", "some"], ["--engine", "spark"]):
        with pytest.raises(SystemExit) as stopped:
            main(["run", str(tmp_path), *args])
        assert stopped.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and args[1] in err[0] and "invalid choice" in err[0]


@pytest.mark.parametrize("window", [["--max-length", "128"], ["--preset", "reference", "--stride", "400"]])
def test_a_stride_the_windows_cannot_hold_is_refused_before_any_paper_is_read(examples_dir, tiny_questions, tmp_path,
                                                                              capsys, window):
    """``--max-length 128`` (with the default stride of 128) started the run, read the folder and failed every
    paper at its windowing ("stride (128) must be smaller than the window's context"), writing 0 answers."""
    out = tmp_path / "r.xlsx"
    assert main(["run", str(examples_dir / "papers"), "--questions", str(tiny_questions), "--out", str(out),
                 "--no-progress", *window]) == 2
    line = one_line_error(capsys)
    assert "--stride" in line and "max_length" in line and not out.exists()


@pytest.mark.parametrize("flags", [["--budget", "2"], ["--small-reader", "some/reader", "--neighbours", "1"],
                                   ["--preset", "reference", "--budget", "2"],
                                   ["--preset", "fast", "--budget", "2", "--retrieval", "dense"]])
def test_a_retrieval_flag_in_a_run_that_reads_every_window_is_refused(examples_dir, tiny_questions, tmp_path, capsys,
                                                                      flags):
    """``--budget 2`` without retrieval was ignored without a word: every window of every paper was read, at many
    times the cost the researcher asked for; with the fast preset, whose small reader chooses the windows, it was
    ignored too."""
    out = tmp_path / "r.xlsx"
    assert main(["run", str(examples_dir / "papers"), "--questions", str(tiny_questions), "--out", str(out),
                 "--no-progress", *flags]) == 2
    line = one_line_error(capsys)
    if "fast" in flags:  # the cascade's small reader chooses how many windows: a budget changed nothing
        assert line.startswith("mlpsych: error: --budget acts only without a cascade") and "--small-reader none" in line
    else:
        assert all(flag in line for flag in flags if flag.startswith("--") and flag != "--preset")
        assert "only where windows are retrieved" in line
    assert not out.exists()


def test_a_coded_results_sheet_is_not_written_over(examples_dir, tiny_questions, tmp_path, capsys):
    """A coder marked answers in results.xlsx; a rerun with the same (default) --out replaced the sheet, and the
    coding with it, without a word."""
    from openpyxl import Workbook

    out = tmp_path / "results.xlsx"
    book = Workbook()
    book.active.title = "answers"
    book.active.append(["paper_id", "question_id", "answer", "correct", "corrected_answer", "notes"])
    book.active.append(["burnout-survey-text", "q1", "topic models", None, None, None])
    book.save(out)
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", out, "--only", "q9") == 2
    assert "no question q9" in one_line_error(capsys)  # a sheet nobody coded yet is no obstacle
    book.active.append(["burnout-survey-text", "q1", "survey", "no", None, "a data source"])
    book.save(out)
    before = out.read_bytes()
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", out) == 2
    assert "1 of its answers are coded" in one_line_error(capsys) and out.read_bytes() == before
    coded_csv = tmp_path / "results.csv"  # coding kept in the run's CSV is kept the same way
    coded_csv.write_text("paper_id,question_id,answer,correct\nburnout-survey-text,q1,survey,no\n", encoding="utf-8")
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", coded_csv) == 2
    assert "1 of its answers are coded (correct filled in)" in one_line_error(capsys)
    assert coded_csv.read_text(encoding="utf-8").endswith("survey,no\n")


@pytest.mark.parametrize("column", ["correct_2", "Comment"])
def test_a_second_coders_or_own_column_is_coding_a_rerun_keeps(examples_dir, tiny_questions, tmp_path, capsys, column):
    """Only the first coder's columns counted: a sheet where a second coder (the review's ``correct_2``) or a coder's
    own column held the only marks was written over by a rerun."""
    from openpyxl import Workbook

    out = tmp_path / "results.xlsx"
    book = Workbook()
    book.active.title = "answers"
    book.active.append(["paper_id", "question_id", "answer", "score", "correct", column])
    book.active.append(["burnout-survey-text", "q1", "topic models", 0.5, None, "yes"])
    book.active.append(["burnout-survey-text", "q1", "survey", 0.2, None, "  "])
    book.save(out)
    before = out.read_bytes()
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", out) == 2
    line = one_line_error(capsys)
    assert f"1 of its answers are coded ({column.lower()} filled in)" in line and out.read_bytes() == before


def test_an_llm_for_questions_without_a_normalize_block_is_refused(examples_dir, tiny_questions, tiny_models, tmp_path,
                                                                   capsys):
    """``--llm FOLDER`` with a question file whose questions have no normalize: block was ignored without a word:
    the run ended with the extractive answers alone."""
    out = tmp_path / "r.xlsx"
    assert main(["run", str(examples_dir / "papers"), "--questions", str(tiny_questions), "--only", "q3", "--out",
                 str(out), "--no-progress", "--llm", str(tiny_models["llama"])]) == 2
    line = one_line_error(capsys)
    assert line.startswith("mlpsych: error: --llm acts only on questions with a normalize: block") and not out.exists()


def test_a_device_typo_is_said_before_any_paper_is_read(examples_dir, tiny_questions, tmp_path, capsys, caplog):
    """``--device gpu`` (or ``--dtype float16`` on a CPU) stopped the run only at the first model load, once every
    paper of the folder had been read."""
    caplog.set_level("INFO", logger="mlpsych")
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", tmp_path / "r.xlsx",
                   "--device", "gpu") == 2
    assert one_line_error(capsys) == "mlpsych: error: unknown device 'gpu' (use auto, cpu, cuda, cuda:N or mps)"
    assert not [r for r in caplog.records if r.name.startswith("mlpsych.ingest")]


def test_help_shows_every_default():
    from mlpsych.cli import build_parser

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    for action in run._actions:
        if action.option_strings and action.dest != "help":
            assert "default" in action.help.lower(), action.option_strings
    assert "benchmarks/README" not in run.format_help() and ".;" not in run.format_help()
    # the flags backed by settings are made from the fields: their description, type, choices and default
    from mlpsych.settings import ReaderSettings, RetrievalSettings

    flags = {a.dest: a for a in run._actions}
    assert flags["stride"].help == f"{ReaderSettings.model_fields['stride'].description} (default: 128)"
    assert flags["stride"].type is int and flags["retrieval"].choices == ["bm25", "dense"]
    assert flags["read"].choices == ["template", "all", "retrieve"] and flags["read"].default is None
    assert flags["budget"].help.startswith(RetrievalSettings.model_fields["budget"].description)


def test_a_bug_is_shown_as_one_and_where_to_report_it(examples_dir, tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr("mlpsych.cli.run_cmd.settings_from_args", broken)
    assert run_cli(examples_dir / "papers", "--out", tmp_path / "r.xlsx") == 1
    err = capsys.readouterr().err
    assert "KeyError" in err and "bug in mlpsych" in err and "report" in err and "Traceback" not in err
    assert f"mlpsych {version()}," in err  # the version a report needs


def test_the_version_is_printed(capsys):
    """`mlpsych --version` was "the following arguments are required: command"."""
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"mlpsych {version()}\n"


def test_what_a_folder_skips_is_said_once(examples_dir, tiny_questions, tmp_path, caplog):
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(examples_dir / "papers" / "burnout-survey-text.txt", papers)
    (papers / "notes.xyz").write_text("not a paper")
    caplog.set_level("INFO", logger="mlpsych")
    assert run_cli(papers, "--questions", tiny_questions, "--only", "q1", "--out", tmp_path / "r.csv", "--cache",
                   tmp_path / "cache") == 0
    assert sum("skipping notes.xyz" in record.getMessage() for record in caplog.records) == 1


def test_a_space_after_a_comma_in_only_and_questions_is_no_part_of_the_name(examples_dir, tiny_questions, tiny_models,
                                                                             tmp_path, capsys):
    """``--only "q3, n"`` was refused ("no question  n") and ``--questions "a.yaml, b.yaml"`` looked for a file
    named " b.yaml": a space typed after a comma became part of the name."""
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(examples_dir / "papers" / "burnout-survey-text.txt", papers)
    extra = tmp_path / "extra.yaml"
    extra.write_text(f"questions:\n  - id: n\n    text: How many took part?\n    models: [{tiny_models['bert']}]\n")
    out = tmp_path / "r.xlsx"
    assert run_cli(papers, "--questions", f"{tiny_questions}, {extra}", "--only", "q3, n", "--no-normalize",
                   "--out", out, "--cache", tmp_path / "cache") == 0, capsys.readouterr().err
    assert [c.value for c in load_workbook(out)["papers"][1]][3:] == ["q3", "n", "text_notes"]


@pytest.mark.parametrize("suffix", [".xlsx", ".csv"])
def test_pages_without_text_are_noted_in_the_papers_sheet_and_the_summary(examples_dir, tiny_questions, tmp_path,
                                                                           capsys, suffix):
    """A PDF with a page ingest found no text on (a scanned table) was read without a word to the user: the note
    stayed in the texts' metadata, and the coder took the paper's missing answers for none."""
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(examples_dir / "papers" / "burnout-survey-text.txt", papers)
    pdf_with_a_page_without_text(papers / "scanned-table.pdf")
    out = tmp_path / f"r{suffix}"
    assert run_cli(papers, "--questions", tiny_questions, "--only", "q3", "--no-normalize", "--out", out,
                   "--cache", tmp_path / "cache") == 0
    summary = capsys.readouterr().out
    note = "pages without text (images? OCR them to include them): 2"
    where = ", in the papers sheet's text_notes column" if suffix == ".xlsx" else ""
    assert f"1 paper read with notes on their text{where} (answers may be missing" in summary
    assert f"  scanned-table: {note}" in summary and "burnout-survey-text:" not in summary
    if suffix == ".xlsx":
        rows = list(load_workbook(out)["papers"].iter_rows(values_only=True))
        notes = {row[0]: row[rows[0].index("text_notes")] for row in rows[1:]}
        assert notes == {"burnout-survey-text": None, "scanned-table": note}
