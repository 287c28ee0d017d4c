"""A results sheet saved as CSV, read back as the rows of its workbook's ``answers`` sheet.

`mlpsych run --out results.csv` writes the final answers with the coder columns, and coders fill them in wherever
their lab keeps tables: Google Sheets, LibreOffice, Excel. What those write back differs (a byte-order mark, ``;``
between cells and decimal commas where the locale writes 0,95, the apostrophe `mlpsych.export.csv_text` put before a
formula-like text), so this reads each of them as the same rows `read_sheet` gives for the .xlsx: lower-cased
headers, blank cells ``None``, offsets and scores as numbers, ``_row`` the row number a spreadsheet shows.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from mlpsych.errors import EvalInputError
from mlpsych.export import FORMULA_STARTS

WORKBOOK_SUFFIXES = (".xlsx", ".xlsm")
CSV_SUFFIXES = (".csv", ".tsv")
CSV_SHEET = "answers"  # the one sheet a run's CSV holds
_DELIMITERS = (",", ";", "\t")
_INTEGERS = ("start", "end", "page")
_REALS = ("score", "confidence")


def check_sheet_file(path: Path, flag: str) -> None:
    """Refuse, before any work, a coded sheet that is neither a workbook nor a CSV of `mlpsych run`."""
    if path.suffix.lower() not in WORKBOOK_SUFFIXES + CSV_SUFFIXES:
        raise EvalInputError(f"{flag} {path}: expected the results sheet of `mlpsych run` (.xlsx, or its .csv)")


def check_coded(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Refuse an answers sheet without a ``correct`` column in one line saying what to add: a CSV of mlpsych before
    2026-11-28 was written without the coder columns (a lab codes it by adding them), and `adapt` asked "is it a
    results sheet?" of it, `calibrate` to "code more answers first"."""
    if rows and "correct" not in rows[0]:
        raise EvalInputError(f"{path}: sheet 'answers' has no 'correct' column: mark each answer in a column named "
                             "correct (and corrections in corrected_answer); a CSV of mlpsych before 2026-11-28 was "
                             "written without these columns: add them")


def is_csv(path: str | Path | bytes) -> bool:
    return not isinstance(path, bytes) and Path(path).suffix.lower() in CSV_SUFFIXES


def read_csv_rows(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The header (lower-cased) and the non-blank rows of a results CSV, each with its spreadsheet row number."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise EvalInputError(f"{path}: not UTF-8 text (Excel's 'CSV (Comma delimited)' writes the Windows code page, "
                             "which changes every letter outside ASCII): save it as 'CSV UTF-8', or give the .xlsx")
    delimiter = _delimiter(text, path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        records = list(reader)
    except csv.Error as error:  # a cell over the csv module's limit (131,072 characters)
        raise EvalInputError(f"{path}: line {reader.line_num}: not readable as CSV ({error})") from None
    if not records:
        return [], []
    names = [h.strip().lower() for h in records[0]]
    decimal_comma = delimiter == ";"  # a semicolon CSV is Excel's where the locale writes 0,95
    rows = []
    for number, cells in enumerate(records[1:], 2):
        if all(not c.strip() for c in cells):
            continue
        row = {name: _value(name, cell, decimal_comma) for name, cell in zip(names, cells) if name}
        row["_row"] = number
        rows.append(row)
    return names, rows


def _delimiter(text: str, path: Path) -> str:
    """The delimiter splitting the header into the most cells; a tab for a .tsv."""
    if path.suffix.lower() == ".tsv":
        return "\t"
    first = text.split("\n", 1)[0]
    return max(_DELIMITERS, key=first.count)


def _value(name: str, cell: str, decimal_comma: bool) -> Any:
    """A cell as the workbook holds it: blank is None, the formula guard's apostrophe is taken off, offsets and
    scores are numbers (where they read as one; anything else is kept as typed for the reader to report)."""
    if not cell.strip():
        return None
    if cell.startswith("'") and cell[1:].startswith(FORMULA_STARTS):
        return cell[1:]
    if name in _INTEGERS or name in _REALS:
        number = cell.strip().replace(",", ".") if decimal_comma else cell.strip()
        try:
            value = float(number)
        except ValueError:
            return cell
        return int(value) if name in _INTEGERS and value.is_integer() else value
    return cell
