"""Spreadsheets ready for coding: the frequencies sheet, coder columns, layout, and source/page on every row."""

from __future__ import annotations

import csv
import errno
import json
import os
import stat
import time
from pathlib import Path

import pytest
from openpyxl import load_workbook

from mlpsych import export
from mlpsych.answers import Answer
from mlpsych.documents import Document
from mlpsych.errors import OutputError
from mlpsych.export import ANSWER_COLUMNS, CODER_COLUMNS, FREQUENCY_COLUMNS, frequency_rows, write_result
from mlpsych.pipeline import RunInfo, RunResult
from mlpsych.questions import parse_question_set

QUESTIONS = parse_question_set({"name": "t", "questions": [
    {"id": "q1", "text": "What techniques were used?", "models": ["m1", "m2"]},
    {"id": "q2", "text": "What software was used?", "models": ["m1"], "allow_empty": True},
    {"id": "q4", "text": "What was __PLACEHOLDER__ used for?", "models": ["m1"], "bridge_from": "q1", "kind": "phrase"},
]}, "inline")

TEXT_A = "We used random forests and BERT. Random forests ranked predictors. Software: scikit-learn."
TEXT_B = "We fitted random  forests in R. They were used to predict burnout."
TEXT_C = "A qualitative study without models."


def _answer(doc: Document, question: str, text: str, *, stage: str = "normalized", final: bool = True,
            bridge: str | None = None, models: tuple[str, ...] = ("m1",), score: float = 0.9) -> Answer:
    start = doc.text.find(text)
    assert start >= 0, text
    return Answer(doc_id=doc.id, question_id=question, text=text, stage=stage, models=list(models), score=score,
                  start=start, end=start + len(text), page=doc.page_at(start), evidence=doc.text,
                  bridge_entity=bridge, final=final)


def make_result() -> RunResult:
    a = Document(id="paper-a", text=TEXT_A, source_path="/data/in/paper-a.pdf", pages=[(0, 33), (33, len(TEXT_A))])
    b = Document(id="paper-b", text=TEXT_B, source_path="/data/in/paper-b.txt")
    c = Document(id="paper-c", text=TEXT_C, source_path="/data/in/paper-c.txt")
    answers = [
        _answer(a, "q1", "random forests"),
        _answer(a, "q1", "BERT"),
        _answer(a, "q1", "Random forests", stage="extractive", final=False),  # not final: not counted
        _answer(a, "q2", "scikit-learn"),
        _answer(a, "q4", "ranked predictors", stage="extractive", bridge="random forests"),
        _answer(b, "q1", "random  forests"),  # same answer, other spacing
        _answer(b, "q1", "R", stage="ungrounded", final=False),
        _answer(b, "q4", "to predict burnout", stage="extractive", bridge="random  forests"),
    ]
    # paper-b mentions random forests twice (two spellings of the same answer) -> 2 mentions, 1 paper
    answers.append(_answer(b, "q1", "random  forests", score=0.5))
    return RunResult(documents=[a, b, c], questions=QUESTIONS, answers=answers,
                     errors={"paper-c": ["reading failed with m1: boom"]},
                     info=RunInfo(seconds=1.5, settings={"reader.stride": 128}))


def test_frequency_rows_group_by_answer_and_list_papers():
    rows = frequency_rows(make_result())
    assert [list(r) for r in rows][0] == FREQUENCY_COLUMNS
    got = [(r["question_id"], r["answer"], r["n_papers"], r["papers"], r["n_mentions"]) for r in rows]
    assert got == [
        # q1: "random forests" (paper-a) and "random  forests" (paper-b, twice) are one answer in 2 papers;
        # the spelling shown is the most frequent one, its white space shown as one space.
        ("q1", "random forests", 2, "paper-a; paper-b", 3),
        ("q1", "BERT", 1, "paper-a", 1),
        ("q2", "scikit-learn", 1, "paper-a", 1),
        ("q4", "ranked predictors", 1, "paper-a", 1),
        ("q4", "to predict burnout", 1, "paper-b", 1),
    ]
    assert rows[0]["question"] == "What techniques were used?"


def test_frequency_rows_empty_run():
    result = RunResult(documents=[Document(id="x", text="t")], questions=QUESTIONS)
    assert frequency_rows(result) == []


def test_xlsx_sheets_layout_and_coder_columns(tmp_path: Path):
    path = write_result(make_result(), tmp_path / "out.xlsx")
    book = load_workbook(path)
    assert book.sheetnames == ["papers", "answers", "frequencies", "model_answers", "llm", "run"]
    answers = book["answers"]
    header = [c.value for c in answers[1]]
    assert header == ANSWER_COLUMNS + CODER_COLUMNS
    assert CODER_COLUMNS == ["correct", "corrected_answer", "notes"]
    for ws in book.worksheets:
        assert ws.freeze_panes == "A2", ws.title
        assert all(c.font.bold for c in ws[1] if c.value), ws.title
    col = {name: i for i, name in enumerate(header)}
    rows = [[c.value for c in r] for r in answers.iter_rows(min_row=2)]
    # 7 final answers + the ungrounded one, each with its source file name (no folder) and page
    assert len(rows) == 8
    for row in rows:
        assert row[col["source_file"]] in ("paper-a.pdf", "paper-b.txt")
        # a PDF's answers have their page; a text file has none, and its page cell is left blank
        pdf = row[col["source_file"]] == "paper-a.pdf"
        assert isinstance(row[col["page"]], int) if pdf else row[col["page"]] is None
        assert row[col["evidence"]]
    bert = next(r for r in rows if r[col["answer"]] == "BERT")
    assert bert[col["page"]] == 1
    scikit = next(r for r in rows if r[col["answer"]] == "scikit-learn")
    assert scikit[col["page"]] == 2  # offset past the first page range
    # evidence is wrapped, widths are set for reading
    letter = answers.cell(row=1, column=col["evidence"] + 1).column_letter
    assert answers.column_dimensions[letter].width >= 60
    assert answers[f"{letter}2"].alignment.wrap_text
    answer_letter = answers.cell(row=1, column=col["answer"] + 1).column_letter
    assert answers.column_dimensions[answer_letter].width >= 30

    freq = book["frequencies"]
    assert [c.value for c in freq[1]] == FREQUENCY_COLUMNS
    first = [c.value for c in freq[2]]
    assert first[:5] == ["q1", "What techniques were used?", "random forests", 2, "paper-a; paper-b"]
    assert freq.max_row == 6

    papers = book["papers"]
    status = {r[0].value: r[2].value for r in papers.iter_rows(min_row=2)}
    assert status == {"paper-a": "ok", "paper-b": "ok", "paper-c": "reading failed with m1: boom"}


def test_files_of_one_name_in_two_folders_are_told_apart_in_every_sheet(tmp_path: Path):
    """`mlpsych ingest a b` of a/paper.txt and b/paper.txt: both rows said source_file "paper.txt", and nothing
    showed which was "paper" and which "paper-2"."""
    from mlpsych.ingest import load_documents

    for folder, text in (("a", TEXT_A), ("b", TEXT_B)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "paper.txt").write_text(text, encoding="utf-8")
    (tmp_path / "b" / "other.txt").write_text(TEXT_C, encoding="utf-8")
    documents = load_documents([tmp_path / "a", tmp_path / "b"], progress=False)
    by_id = {d.id: d for d in documents}
    answers = [_answer(by_id["paper"], "q1", "random forests"), _answer(by_id["paper-2"], "q1", "burnout")]
    result = RunResult(documents=documents, questions=QUESTIONS, answers=answers)
    book = load_workbook(write_result(result, tmp_path / "out.xlsx"))
    expected = {"paper": str(Path("a", "paper.txt")), "paper-2": str(Path("b", "paper.txt")), "other": "other.txt"}
    for sheet, column in (("papers", "source_file"), ("answers", "source_file")):
        rows = list(book[sheet].iter_rows(values_only=True))
        shown = {row[0]: row[rows[0].index(column)] for row in rows[1:]}
        assert shown == (expected if sheet == "papers" else {k: expected[k] for k in ("paper", "paper-2")}), sheet
    from mlpsych.app.results import status_table  # the app's papers table shows the same

    table = status_table(result)
    assert dict(zip(table["paper"], table["source_file"])) == expected


def test_agree_reads_the_coder_columns_back(tmp_path: Path):
    """The coder columns written empty are what `mlpsych agree` reads once a researcher fills them."""
    from mlpsych.evaluation import agree

    path = write_result(make_result(), tmp_path / "coded.xlsx")
    book = load_workbook(path)
    ws = book["answers"]
    header = [c.value for c in ws[1]]
    correct = header.index("correct") + 1
    for i, row in enumerate(ws.iter_rows(min_row=2), start=0):
        row[correct - 1].value = "yes" if i % 2 == 0 else "no"
    book.save(path)
    codings, coders = agree.read_codings(path)
    assert coders == ["correct"]
    marks = [c.marks["correct"] for c in codings]
    assert marks.count(True) == 4 and marks.count(False) == 4


def test_csv_and_jsonl_formats_unchanged(tmp_path: Path):
    result = make_result()
    with write_result(result, tmp_path / "out.csv").open(encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ANSWER_COLUMNS + CODER_COLUMNS  # a CSV is a coding form too
        rows = list(reader)
    assert all(r[c] == "" for r in rows for c in CODER_COLUMNS)
    assert len(rows) == 8 and all(r["source_file"] for r in rows)
    assert all(bool(r["page"]) == (r["source_file"] == "paper-a.pdf") for r in rows)  # a .txt: blank, not 1
    lines = (write_result(result, tmp_path / "out.jsonl")).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(result.answers)
    assert list(json.loads(lines[0])) == ANSWER_COLUMNS


def test_unknown_extension_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="use a .xlsx, .csv or .jsonl"):
        write_result(make_result(), tmp_path / "out.ods")


def test_control_characters_from_llm_output_do_not_break_the_workbook(tmp_path):
    """openpyxl refuses control characters in cells; an LLM's raw output may contain them."""
    from openpyxl import load_workbook

    from mlpsych.documents import Document
    from mlpsych.export import write_result
    from mlpsych.pipeline import RunInfo, RunResult
    from mlpsych.questions import QuestionSet, QuestionTemplate

    result = RunResult(
        documents=[Document(id="p", text="x")],
        questions=QuestionSet(questions=[QuestionTemplate(id="q1", text="What?", models=["m"])]),
        llm_outputs=[{"paper_id": "p", "question_id": "q1", "llm": "l", "model": "m", "raw_output": "a\x00b\x07c"}],
    )
    write_result(result, tmp_path / "r.xlsx")
    assert load_workbook(tmp_path / "r.xlsx")["llm"]["E2"].value == "a\ufffdb\ufffdc"



def test_sheet_shows_an_answer_with_its_line_break_as_a_space():
    """The released rules keep a span's line break in the answer; the sheet shows it as its evidence does."""
    from mlpsych.export import answer_rows, paper_rows

    doc = Document(id="paper-d", text="A changing landscape.\nFuture work follows.", source_path="/d/paper-d.txt")
    result = RunResult(documents=[doc], questions=QUESTIONS, answers=[_answer(doc, "q1", "landscape.\nFuture")])
    assert [r["answer"] for r in answer_rows(result)] == ["landscape. Future"]
    assert paper_rows(result)[0]["q1"] == "landscape. Future"
    assert [r["answer"] for r in frequency_rows(result)] == ["landscape. Future"]


def test_a_cell_over_excels_limit_is_cut_visibly(tmp_path):
    """An answer most papers of a large study give lists them all in one frequencies cell: over 32,767 characters
    Excel calls the workbook damaged, so the cell is cut and says so; n_papers still counts them all."""
    docs = [Document(id=f"Author{i:04d}_2021_a_long_file_name_of_a_paper", text="We used SPSS.") for i in range(900)]
    result = RunResult(documents=docs, questions=QUESTIONS, answers=[_answer(d, "q2", "SPSS") for d in docs])
    write_result(result, tmp_path / "r.xlsx")
    wb = load_workbook(tmp_path / "r.xlsx")
    longest = max(len(c.value) for ws in wb for row in ws.iter_rows() for c in row if isinstance(c.value, str))
    assert longest <= 32_767
    row = next(r for r in wb["frequencies"].iter_rows(min_row=2, values_only=True) if r[2] == "SPSS")
    assert row[3] == 900
    kept, note = row[4].rsplit(" … [", 1)
    assert note.endswith("more characters cut at Excel's cell limit]")
    full = "; ".join(d.id for d in docs)
    assert full.startswith(kept) and len(kept) + int(note.split()[0].replace(",", "")) == len(full)


def test_a_workbook_is_written_without_a_scan_of_the_sheet_per_row(tmp_path, monkeypatch):
    """openpyxl finds a sheet's last row and column by scanning all its cells; asked once per row written, the export
    was quadratic in the answers (100 papers of 135 answers: ten minutes). The sheet is scanned a few times, not once a
    row, and text stays text."""
    from openpyxl.worksheet.worksheet import Worksheet

    scans = 0
    for name in ("max_row", "max_column"):
        scan = getattr(Worksheet, name)

        def counted(ws, scan=scan):
            nonlocal scans
            scans += 1
            return scan.fget(ws)

        monkeypatch.setattr(Worksheet, name, property(counted))
    docs = [Document(id=f"p{i:03d}", text="We used SPSS and =SUM(A1).") for i in range(100)]
    answers = [_answer(d, "q2", name) for d in docs for name in ("SPSS", "=SUM(A1)")]
    write_result(RunResult(documents=docs, questions=QUESTIONS, answers=answers), tmp_path / "r.xlsx")
    assert scans < 100, f"{scans} scans of a sheet for {len(answers)} answers"
    monkeypatch.undo()
    sheet = load_workbook(tmp_path / "r.xlsx")["answers"]
    assert sheet.max_row == 201 and sheet.cell(row=2, column=ANSWER_COLUMNS.index("answer") + 1).data_type == "s"
    assert sorted(c.value for c in sheet["E"][1:3]) == ["=SUM(A1)", "SPSS"]


def test_a_sheet_past_excels_rows_is_refused_saying_which_file_holds_every_row(tmp_path, monkeypatch):
    """A study whose answers sheet passes Excel's rows a sheet (1,048,576; here 6, so the test is small): the
    workbook is refused before anything is written, naming the sheet and the .csv / .jsonl that hold every row, and
    a file already there is kept; openpyxl wrote past the limit and the run ended in a bug report."""
    monkeypatch.setattr(export, "EXCEL_ROW_LIMIT", 30, raising=False)
    docs = [Document(id=f"p{i:02d}", text="We used SPSS and Stata.") for i in range(15)]
    answers = [_answer(d, "q2", name) for d in docs for name in ("SPSS", "Stata")]
    result = RunResult(documents=docs, questions=QUESTIONS, answers=answers)
    out = tmp_path / "r.xlsx"
    out.write_bytes(b"an earlier run")
    with pytest.raises(OutputError, match=r"r\.xlsx: as a workbook its sheets would have answers 31 rows, past "
                                          r"Excel's 30 rows a sheet .*\.csv.*\.jsonl"):
        write_result(result, out)
    assert out.read_bytes() == b"an earlier run" and os.listdir(tmp_path) == ["r.xlsx"]
    with open(write_result(result, tmp_path / "r.csv"), encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == 30
    write_result(replace_answers(result, answers[:29]), out)  # one answer fewer fits
    assert load_workbook(out)["answers"].max_row == 30


def replace_answers(result: RunResult, answers: list[Answer]) -> RunResult:
    from dataclasses import replace

    return replace(result, answers=answers)


def test_an_answer_written_in_the_singular_in_one_paper_and_plural_in_another_is_one_frequency_row():
    """The LLM named "random forests" in one paper and "Random forest" in another: the frequencies sheet had a row of
    1 paper for each, so the technique's count was split (the LLM's items of one paper are told apart this way)."""
    a = Document(id="paper-a", text=TEXT_A)
    b = Document(id="paper-b", text="Random forest models in R. We used C++ and C#.")
    answers = [_answer(a, "q1", "random forests"), _answer(b, "q1", "Random forest"),
               _answer(b, "q2", "C++"), _answer(b, "q2", "C#")]
    c = Document(id="paper-c", text="Burnout predicted turnover (β = −0.23).")
    d = Document(id="paper-d", text="Engagement predicted turnover (β = 0.23).")
    answers += [_answer(c, "q3", "β = −0.23"), _answer(d, "q3", "β = 0.23")]  # a sign matters in a number
    questions = parse_question_set({"name": "t", "questions": [
        *[q.model_dump() for q in QUESTIONS.questions],
        {"id": "q3", "text": "What was the effect size?", "models": ["m1"], "kind": "number"}]}, "inline")
    result = RunResult(documents=[a, b, c, d], questions=questions, answers=answers)
    got = [(r["question_id"], r["n_papers"], r["papers"], r["n_mentions"]) for r in frequency_rows(result)]
    assert sorted(got) == [("q1", 2, "paper-a; paper-b", 2), ("q2", 1, "paper-b", 1), ("q2", 1, "paper-b", 1),
                           ("q3", 1, "paper-c", 1), ("q3", 1, "paper-d", 1)]




def test_an_entity_its_paper_defines_counts_by_its_long_form_in_the_frequencies():
    """"RF" in a paper defining "random forests (RF)" and "random forest" in another were two rows; "LDA" defined as
    latent Dirichlet allocation in one paper and linear discriminant analysis in another was one."""
    a = Document(id="paper-a", text="We trained random forests (RF) and Latent Dirichlet allocation (LDA). RF won.")
    b = Document(id="paper-b", text="A random forest and linear discriminant analysis (LDA) were compared.")
    c = Document(id="paper-c", text="Random forests (RF) were tuned.")
    answers = [_answer(a, "q1", "RF"), _answer(b, "q1", "random forest"), _answer(c, "q1", "Random forests (RF)"),
               _answer(a, "q1", "LDA"), _answer(b, "q1", "LDA")]
    result = RunResult(documents=[a, b, c], questions=QUESTIONS, answers=answers)
    got = sorted((r["n_papers"], r["papers"]) for r in frequency_rows(result))
    assert got == [(1, "paper-a"), (1, "paper-b"), (3, "paper-a; paper-b; paper-c")]


def test_two_runs_writing_one_out_at_once_each_write_their_own_file(tmp_path, monkeypatch):
    """Both runs wrote `.out.csv.tmp.csv`: the one that finished first took the other's half-written file for its
    own, and the other stopped with "out.csv cannot be written (No such file or directory)"."""
    out = tmp_path / "out.csv"
    runs: list[Path] = []

    def writer(result: RunResult, tmp: Path) -> None:
        """The first run writes half its file, the second writes all of its own and renames it, the first ends."""
        runs.append(tmp)
        with tmp.open("w", encoding="utf-8") as f:
            if len(runs) == 2:
                f.write("second run\n")
                return
            f.write("first run, ")
            f.flush()
            write_result(result, out)
            assert out.read_text(encoding="utf-8") == "second run\n"
            f.write("in full\n")

    monkeypatch.setitem(export.WRITERS, ".csv", writer)
    write_result(make_result(), out)
    assert out.read_text(encoding="utf-8") == "first run, in full\n"  # the last rename wins, whole
    assert runs[0] != runs[1] and {p.parent for p in runs} == {tmp_path}
    assert all(p.name.startswith(".out.csv.") and p.name.endswith(".tmp.csv") for p in runs)  # hidden, beside
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_a_temporary_file_has_the_permissions_the_output_had(tmp_path):
    """A private temporary file (``mkstemp``'s) became, renamed, a sheet only its owner could open."""
    umask = os.umask(0o022)
    try:
        path = write_result(make_result(), tmp_path / "out.csv")
    finally:
        os.umask(umask)
    if os.name != "nt":
        assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_killed_writes_temporary_file_goes_at_the_next_write_after_an_hour(tmp_path):
    """A run killed (SIGKILL) while writing left its hidden temporary file; it stayed for good. Left an hour or
    more, the next write of that output removes it (an older mlpsych's one name too); a younger one may be
    another run writing now, and another output's are not this write's."""
    now = time.time()
    names = {"old": ".out.xlsx.0a1b2c3d4e5f.tmp.xlsx", "older mlpsych": ".out.xlsx.tmp.xlsx",
             "young": ".out.xlsx.9f8e7d6c5b4a.tmp.xlsx", "other output": ".other.xlsx.0a1b2c3d4e5f.tmp.xlsx"}
    for what, name in names.items():
        (tmp_path / name).write_bytes(b"half")
        age = 10 * 60 if what == "young" else 61 * 60
        os.utime(tmp_path / name, (now - age, now - age))
    write_result(make_result(), tmp_path / "out.xlsx")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [names["young"], names["other output"], "out.xlsx"])


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"), RuntimeError("a bug")])
def test_a_failed_write_leaves_no_temporary_file_and_the_output_as_it_was(error, tmp_path, monkeypatch):
    out = write_result(make_result(), tmp_path / "out.csv")
    good = out.read_bytes()

    def failing(result: RunResult, tmp: Path) -> None:
        tmp.write_text("half a sheet", encoding="utf-8")
        raise error

    monkeypatch.setitem(export.WRITERS, ".csv", failing)
    with pytest.raises(OutputError if isinstance(error, OSError) else RuntimeError):
        write_result(make_result(), out)
    assert out.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]
