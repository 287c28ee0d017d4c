"""A run's CSV, as coders' programs save it back, reads as the rows of its workbook's answers sheet."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

openpyxl = pytest.importorskip("openpyxl")

from mlpsych.errors import EvalInputError  # noqa: E402
from mlpsych.evaluation.evaluate import load_predictions, read_sheet  # noqa: E402
from mlpsych.evaluation.sheets import check_sheet_file  # noqa: E402
from mlpsych.export import csv_text  # noqa: E402

HEADER = ["paper_id", "question_id", "Answer", "score", "confidence", "start", "end", "page", "final", "evidence",
          "correct", "corrected_answer"]
ROWS = [
    ["p1", "q1", "random forests", 0.875, 0.25, 120, 134, 3, True, 'We used "random forests", then\nSVMs.', "yes",
     None],
    ["p1", "q2", "=HYPERLINK(\"x\")", 0.5, 0.125, 7, 23, 1, True, "-2+3 in a cell", "no", "-0.23"],
    [None, None, None, None, None, None, None, None, None, None, None, None],  # a blank row, skipped by both
    ["p2", "q1", "Größe (β = −0.23)", 0.0625, 0.5, 0, 17, 12, False, None, None, "+ a note"],
]


def _workbook(path: Path) -> Path:
    book = openpyxl.Workbook()
    book.active.title = "answers"
    book.active.append(HEADER)
    for row in ROWS:
        book.active.append(row)
    for cells in book.active.iter_rows():
        for cell in cells:
            if isinstance(cell.value, str) and cell.value.startswith("="):
                cell.data_type = "s"  # text, as `mlpsych run` writes it: never a formula
    book.save(path)
    return path


def _cell(value, decimal_comma: bool) -> str:
    """A cell as a spreadsheet program writes it to CSV (mlpsych's formula guard kept, as programs keep it)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and decimal_comma:
        return str(value).replace(".", ",")
    return str(csv_text(value))


# name: (encoding, delimiter, decimal comma, suffix) as Google Sheets, Excel's "CSV UTF-8" in an English and a
# German locale, and a tab-separated export
DIALECTS = {
    "google-sheets": ("utf-8", ",", False, ".csv"),
    "excel-csv-utf8": ("utf-8-sig", ",", False, ".csv"),
    "excel-german": ("utf-8-sig", ";", True, ".csv"),
    "tsv": ("utf-8", "\t", False, ".tsv"),
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_coded_sheet_saved_as_csv_reads_as_its_workbook(tmp_path, dialect):
    """Coding saved as CSV was refused ("a CSV holds no sheet 'answers'"), so a lab coding in Google Sheets or
    LibreOffice had to paste its rows into the workbook by hand; the CSV the run wrote could not be scored."""
    encoding, delimiter, decimal_comma, suffix = DIALECTS[dialect]
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter)
    writer.writerow(HEADER)
    writer.writerows([_cell(v, decimal_comma) for v in row] for row in ROWS)
    saved = tmp_path / f"coded{suffix}"
    saved.write_bytes(buffer.getvalue().encode(encoding))
    from_csv = read_sheet(saved, "answers")
    expected = read_sheet(_workbook(tmp_path / "coded.xlsx"), "answers")
    for row in expected:  # booleans: a CSV holds the words a program writes for them, which truthy() reads
        row["final"] = "TRUE" if row["final"] else "FALSE"
    assert from_csv == expected
    assert [r["_row"] for r in from_csv] == [2, 3, 5]
    assert read_sheet(saved, "papers", required=False) == []
    assert [r["answer"] for r in load_predictions(saved)] == ["random forests", '=HYPERLINK("x")',
                                                              "Größe (β = −0.23)"]


def test_a_csv_that_is_not_utf8_or_asked_for_another_sheet_is_one_clear_error(tmp_path):
    saved = tmp_path / "coded.csv"
    saved.write_bytes("paper_id,question_id,answer,correct\np1,q1,Größe,yes\n".encode("cp1252"))
    with pytest.raises(EvalInputError, match="not UTF-8 text .* save it as 'CSV UTF-8'"):
        read_sheet(saved, "answers")
    saved.write_text("paper_id,question_id,answer\n", encoding="utf-8")
    with pytest.raises(EvalInputError, match="a CSV holds only a run's 'answers', not 'papers'"):
        read_sheet(saved, "papers")
    saved.write_text(f"paper_id,question_id,answer\np1,q1,a\np1,q1,\"{'x' * 200_000}\"\n", encoding="utf-8")
    with pytest.raises(EvalInputError, match="coded.csv: line 3: not readable as CSV"):
        read_sheet(saved, "answers")
    saved.write_text("paper_id,correct,answer,Correct\np1,yes,x,no\n", encoding="utf-8")
    with pytest.raises(EvalInputError, match="two columns named alike"):
        read_sheet(saved, "answers")


def test_only_a_workbook_or_a_csv_is_taken_for_a_coded_sheet(tmp_path):
    for name in ("coded.xlsx", "coded.CSV", "coded.tsv"):
        check_sheet_file(tmp_path / name, "--coded")
    with pytest.raises(EvalInputError, match=r"--coded .*coded\.ods: expected the results sheet"):
        check_sheet_file(tmp_path / "coded.ods", "--coded")


def test_an_older_versions_csv_without_coder_columns_says_to_add_them(tmp_path):
    """A CSV of mlpsych before 2026-11-28 has no coder columns; given uncoded, `adapt` asked "is it a results
    sheet?" (it is one), `calibrate` to "code more answers first" and `agree` found no column "to read codes from".
    Each now says, in one line, which columns to add."""
    from mlpsych.cli.calibrate_cmd import _sheet_rows
    from mlpsych.coding.coded import coding_from_sheets
    from mlpsych.documents import Document
    from mlpsych.evaluation.agree import read_codings
    from mlpsych.export import ANSWER_COLUMNS

    old = tmp_path / "results.csv"  # as `mlpsych run --out results.csv` wrote it then
    with old.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=ANSWER_COLUMNS, restval="")
        writer.writeheader()
        writer.writerow({"paper_id": "p1", "question_id": "q1", "answer": "random forests", "stage": "extractive",
                         "models": "m", "final": True, "score": 0.5, "start": 8, "end": 22})
    text = "We used random forests."
    for read in (lambda: read_codings(old), lambda: _sheet_rows(old, {"p1": text}),
                 lambda: coding_from_sheets([old], {"p1": Document("p1", text)})):
        with pytest.raises(EvalInputError) as refused:
            read()
        message = str(refused.value)
        assert "\n" not in message and "a column named correct" in message and "add them" in message
