"""The review reads the answers sheet alone and writes back only its changed rows (mlpsych.workbook): openpyxl
reading and writing all six sheets made a 1,000-paper study's review take minutes to open and a minute to save."""

from __future__ import annotations

import io
import re
import zipfile
from datetime import datetime, timezone
from pathlib import Path

from test_review import TEXT, results_sheet

from mlpsych.app.review import ReviewSheet
from mlpsych.documents import Document
from mlpsych.evaluation.evaluate import read_sheet

DOCUMENTS = {"A": Document("A", TEXT, pages=[(0, len(TEXT))], source_path="/papers/A.pdf")}
EXCEL_ONLY = (b'<extLst><ext uri="{CCE6A557-97BC-4b89-ADB6-D9C93CAAB3DF}" '
              b'xmlns:x14="http://schemas.microsoft.com/office/spreadsheetml/2009/9/main"><x14:dataValidations '
              b'count="0" xmlns:xm="http://schemas.microsoft.com/office/excel/2006/main"/></ext></extLst>')


def parts(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def rewritten(path: Path, part: str, change) -> None:
    """``path`` with one part's XML changed by ``change`` (what another program writes)."""
    kept = parts(path)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in kept.items():
            archive.writestr(name, change(data) if name == part else data)


def test_opening_the_review_reads_the_answers_sheet_alone(tmp_path: Path, monkeypatch):
    """Opening read every sheet of the workbook (the model_answers sheet is two thirds of a large study's): 71-189 s
    at 1,000 papers, for a view of one sheet."""
    from openpyxl.worksheet._reader import WorkSheetParser

    path = results_sheet(tmp_path / "results.xlsx")
    answers = read_sheet(path, "answers")
    read = 0
    parse_cell = WorkSheetParser.parse_cell

    def counted(self, element):
        nonlocal read
        read += 1
        return parse_cell(self, element)

    monkeypatch.setattr(WorkSheetParser, "parse_cell", counted)
    review = ReviewSheet(path, DOCUMENTS)
    assert read <= (len(answers) + 1) * (len(answers[0]) - 1)  # the header and rows of answers, nothing else
    assert [i.answer for i in review.items("A")] == ["students", "caret", "random forests"]


def test_leaving_a_paper_writes_its_rows_and_keeps_every_other_part_as_it_was(tmp_path: Path):
    """Leaving a paper wrote the whole workbook through openpyxl (32-72 s at 1,000 papers), which also dropped what
    it does not read, such as what Excel keeps in a sheet's extLst (lists drawing on another sheet). Now only the
    answers sheet is rewritten, and the time of the workbook's last change (docProps/core.xml, which Excel shows:
    it stayed the run's): every other part stays byte for byte."""
    from openpyxl import load_workbook

    path = results_sheet(tmp_path / "results.xlsx")
    rewritten(path, "xl/worksheets/sheet1.xml", lambda xml: xml.replace(b"</worksheet>", EXCEL_ONLY + b"</worksheet>"))
    rewritten(path, "docProps/core.xml",
              lambda xml: re.sub(rb"(<dcterms:modified\b[^>]*>)[^<]*", rb"\g<1>2020-01-02T03:04:05Z", xml))
    before = parts(path)
    review = ReviewSheet(path, DOCUMENTS, coder="2")
    review.mark(review.items("A")[0].row, False)
    review.add("A", "q1", "Support vector machines")
    saved = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)
    review.save()
    after = parts(path)
    assert after.keys() == before.keys() and EXCEL_ONLY in after["xl/worksheets/sheet1.xml"]
    assert {name for name in after if after[name] != before[name]} == {"xl/worksheets/sheet2.xml", "docProps/core.xml"}
    stamp = rb"<dcterms:modified [^>]*>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ</dcterms:modified>"  # as Excel writes it
    assert re.search(stamp, after["docProps/core.xml"])
    book = load_workbook(path, read_only=True)
    book.close()
    properties = book.properties  # the time Excel shows as the workbook's last change: the save's
    assert saved <= properties.modified <= datetime.now(timezone.utc).replace(tzinfo=None)
    created = re.compile(rb"<dcterms:created\b.*?</dcterms:created>")
    assert created.search(after["docProps/core.xml"]).group() == created.search(before["docProps/core.xml"]).group()
    rows = read_sheet(path, "answers")
    assert [(r["answer"], r["correct_2"]) for r in rows] == [("random forests", None), ("students", "no"),
                                                            ("caret", None), ("Support vector machines", "yes")]


def excel_like(xml: bytes) -> bytes:
    """A worksheet as other programs may write it: the main namespace under a prefix, and from row 3 on rows without
    their (optional) numbers, and cells without theirs where they follow the cell before."""
    from openpyxl.utils import column_index_from_string

    def unnumbered(row: re.Match) -> bytes:
        previous = 0

        def cell(ref: re.Match) -> bytes:
            nonlocal previous
            column = column_index_from_string(ref.group(1).decode())
            follows, previous = column == previous + 1, column
            return b"" if follows else ref.group()

        return re.sub(rb'\sr="([A-Z]+)\d+"', cell, row.group(1))

    xml = re.sub(rb"<(/?)([A-Za-z]\w*)([\s>/])", rb"<\1x:\2\3", xml).replace(b'xmlns="', b'xmlns:x="', 1)
    return re.sub(rb'<x:row r="(?:[3-9]|\d\d+)"(.*?</x:row>)', lambda row: b"<x:row" + unnumbered(row), xml,
                  flags=re.S)


def test_cells_written_into_a_sheet_laid_out_as_other_programs_write_it(tmp_path: Path):
    """Set cells go where a spreadsheet program reads them whatever the sheet's layout: numbers and true/false as
    such, text as text (never a formula) in the style of the cell it replaces, new rows in order, a new column with
    its yes/no list, the sheet's size widened."""
    from openpyxl import load_workbook
    from openpyxl.xml.functions import tostring

    from mlpsych import workbook
    from mlpsych.export import choice_list

    path = results_sheet(tmp_path / "results.xlsx")
    rewritten(path, "xl/worksheets/sheet2.xml", excel_like)
    data = path.read_bytes()
    header = workbook.read_values(data, "answers")[0]
    notes, extra = header.index("notes") + 1, len(header) + 1
    cells = {1: {extra: "correct_2"}, 3: {notes: "=1+1", extra: "no"}, 4: {notes: None},
             6: {1: "A", header.index("start") + 1: 12, header.index("final") + 1: True}}
    written = workbook.write_cells(data, "answers", cells, [tostring(choice_list(extra).to_tree())])
    assert zipfile.ZipFile(io.BytesIO(written)).testzip() is None
    sheet = load_workbook(io.BytesIO(written))["answers"]
    values = [[c.value for c in row] for row in sheet.iter_rows()]
    assert sheet.dimensions == f"A1:{sheet.cell(1, extra).column_letter}6"
    assert values[0][extra - 1] == "correct_2" and values[2][notes - 1] == "=1+1" and values[2][extra - 1] == "no"
    assert sheet.cell(3, notes).data_type == "s" and sheet.cell(3, notes).alignment.wrap_text  # its style kept
    assert values[3][notes - 1] is None and values[4] == [None] * extra
    assert values[5][0] == "A" and values[5][header.index("start")] == 12 and values[5][header.index("final")] is True
    untouched = load_workbook(io.BytesIO(data))["answers"]
    assert values[1][:len(header)] == [c.value for c in untouched[2]]
    lists = {str(v.sqref): v.formula1 for v in sheet.data_validations.dataValidation}
    assert lists[f"{sheet.cell(1, extra).column_letter}2:{sheet.cell(1, extra).column_letter}1048576"] == '"yes,no"'
    assert len(lists) == 2


def test_the_sheet_is_read_as_openpyxl_reads_it(tmp_path: Path):
    """The review reads the answers sheet itself where its cells are plain (openpyxl's reader took 12 s of CPU for a
    1,000-paper study's sheet, most of it in its inline-string objects), and through openpyxl where they are not
    (a date, another program's layout): either way the values openpyxl reads."""
    from datetime import datetime

    from openpyxl import load_workbook

    from mlpsych import workbook

    def openpyxl_values(path: Path) -> list[list]:
        sheet = load_workbook(path, read_only=True)["answers"]
        sheet.reset_dimensions()
        return [list(row) for row in sheet.iter_rows(values_only=True)]

    path = results_sheet(tmp_path / "results.xlsx")
    review = ReviewSheet(path, DOCUMENTS)
    for item, text in zip(review.items("A"), ("a & b < c", "line\r\nend  ", "日本 \"quoted\" it's")):
        review.note(item.row, text)
        review.correct_to(item.row, "=1+1")
    review.save()
    assert workbook.read_values(path.read_bytes(), "answers") == openpyxl_values(path)
    other = tmp_path / "other.xlsx"
    other.write_bytes(path.read_bytes())
    rewritten(other, "xl/worksheets/sheet2.xml", excel_like)
    assert workbook.read_values(other.read_bytes(), "answers") == openpyxl_values(other) == openpyxl_values(path)
    book = load_workbook(path)
    book["answers"]["U2"] = datetime(2026, 11, 28)
    book.save(other)
    values = workbook.read_values(other.read_bytes(), "answers")
    assert values == openpyxl_values(other) and values[1][20] == datetime(2026, 11, 28)
    assert workbook.read_values(other.read_bytes(), "nothing") is None
