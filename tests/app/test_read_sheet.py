"""read_sheet reads one sheet alone (mlpsych.workbook, as the review does; here beside the review's workbook tests,
whose builders it uses): openpyxl's read-only reader took 12-29 s for a 1,000-paper study's answers sheet in
`mlpsych agree`, `calibrate`, `adapt --coded` and `eval --pred`. Its rows must be those openpyxl's gave, whatever
wrote the workbook; benchmarks/read_sheet.py times the two."""

from __future__ import annotations

import contextlib
import io
import re
import zipfile
from datetime import date, datetime, time, timedelta
from pathlib import Path
from unittest import mock

import pytest
from test_review import results_sheet
from test_review_workbook import DOCUMENTS, excel_like, parts, rewritten

from mlpsych.app.review import ReviewSheet
from mlpsych.errors import EvalInputError
from mlpsych.evaluation.evaluate import read_sheet
from tests.benchmarks.scripts import load_script

benchmark = load_script("read_sheet", "read_sheet_benchmark")
openpyxl_rows, saved_by_excel = benchmark.openpyxl_rows, benchmark.saved_by_excel

ANSWERS = "xl/worksheets/sheet2.xml"  # the answers sheet of a results workbook
COMPUTED = {"sum": (b"<f>1+1</f><v>2</v>", 2), "joined": (b'<f>A2&amp;"!"</f><v>A!</v>', "A!"),
            "truth": (b"<f>TRUE()</f><v>1</v>", True), "third": (b"<f>1/3</f><v>0.3333333333333333</v>", 1 / 3)}


def _sheets(path: Path) -> list[str]:
    from openpyxl import load_workbook

    book = load_workbook(path, read_only=True)
    book.close()
    return book.sheetnames


def _openpyxl_values(path: Path, sheet: str) -> list[list]:
    """The sheet's values as openpyxl's read-only reader gives them (``data_only``, its size reset): the reference."""
    from openpyxl import load_workbook

    book = load_workbook(path, read_only=True, data_only=True)
    try:
        cells = book[sheet]
        cells.reset_dimensions()
        return [list(row) for row in cells.iter_rows(values_only=True)]
    finally:
        book.close()


def _plain(path: Path, sheet: str) -> bool:
    """Whether the sheet is read here: openpyxl's worksheet parser reads none of its cells."""
    from openpyxl.worksheet._reader import WorkSheetParser

    from mlpsych import workbook

    original = WorkSheetParser.parse_cell
    with mock.patch.object(WorkSheetParser, "parse_cell", autospec=True, side_effect=original) as cell:
        workbook.read_values(path, sheet)
    return cell.call_count == 0


def _computed(xml: bytes) -> bytes:
    """An answers sheet given columns of formulas with their values, as a spreadsheet program saves them."""
    heads, cells = b"", b""
    for letter, (name, (formula, value)) in zip("UVWX", COMPUTED.items()):
        kind = {str: b' t="str"', bool: b' t="b"'}.get(type(value), b"")
        heads += f'<c r="{letter}1" t="inlineStr"><is><t>{name}</t></is></c>'.encode()
        cells += f'<c r="{letter}2"'.encode() + kind + b">" + formula + b"</c>"
    first = xml.index(b"</row>")
    second = xml.index(b"</row>", first + 1)
    xml = xml[:first] + heads + xml[first:second] + cells + xml[second:]
    return re.sub(rb'(<dimension ref="A1:)S', rb"\1X", xml)


def _saved_by_openpyxl(path: Path, to: Path, cells: dict[str, object], rows: bool = False) -> Path:
    """The workbook as a coder's edits in a program leave it, saved by openpyxl (text as inline strings): ``cells``
    set, and with ``rows`` a blank row, a short row and a cell beyond the header added."""
    from openpyxl import load_workbook

    book = load_workbook(path)
    sheet = book["answers"]
    for ref, value in cells.items():
        sheet[ref] = value
    if rows:
        sheet.append([" ", None, ""])
        sheet.append(["B", "B.txt", "q1"])
        sheet.cell(sheet.max_row + 2, 30, "beyond the header")
    book.save(to)
    return to


def test_every_sheet_reads_as_openpyxl_read_it(tmp_path: Path):
    """mlpsych's sheets, a reviewed one (text written by the review), a coding saved by openpyxl, the same saved as
    Excel saves it, another program's layout (a namespace prefix, rows and cells without numbers), a date and
    formulas: all read here (the last four went through openpyxl), the same rows, values, types and row numbers as
    openpyxl's reader gives; from bytes too."""
    path = results_sheet(tmp_path / "results.xlsx")
    reviewed = results_sheet(tmp_path / "reviewed.xlsx")
    review = ReviewSheet(reviewed, DOCUMENTS, coder="2")
    for item, text in zip(review.items("A"), ("a & b < c", "line\r\nend  ", "日本 \"quoted\" it's _x000D_")):
        review.note(item.row, text)
        review.correct_to(item.row, "=1+1")
    review.mark(review.items("A")[0].row, True)
    review.save()
    other = tmp_path / "other.xlsx"
    other.write_bytes(reviewed.read_bytes())
    rewritten(other, ANSWERS, excel_like)
    edited = _saved_by_openpyxl(reviewed, tmp_path / "edited.xlsx",
                                {"Q2": "yes", "S2": "  spaced\nline  ", "Q3": 0.5, "Q4": 7}, rows=True)
    saved = _saved_by_openpyxl(edited, tmp_path / "saved.xlsx", {"R2": "=1+1", "U2": datetime(2026, 11, 28, 9, 30)})
    excel = saved_by_excel(edited, tmp_path / "excel.xlsx")
    computed = tmp_path / "computed.xlsx"
    computed.write_bytes(path.read_bytes())
    rewritten(computed, ANSWERS, _computed)
    assert all(_plain(p, "answers") for p in (path, reviewed, edited, excel, other, saved, computed))
    assert b't="s"' in parts(excel)[ANSWERS] and b"<is>" not in parts(excel)[ANSWERS]
    for workbook in (path, reviewed, edited, excel, other, saved, computed):
        for sheet in _sheets(workbook):
            rows = read_sheet(workbook, sheet)
            assert rows == openpyxl_rows(workbook, sheet) and rows == read_sheet(workbook.read_bytes(), sheet)
            assert all(type(a) is type(b) for new, old in zip(rows, openpyxl_rows(workbook, sheet))
                       for a, b in zip(new.values(), old.values()))
    assert {name: read_sheet(computed, "answers")[0][name] for name in COMPUTED} == {
        name: value for name, (_, value) in COMPUTED.items()}
    assert [r["_row"] for r in read_sheet(saved, "answers")] == [2, 3, 4, 6, 8]


def test_a_formula_reads_as_its_value_in_the_review_as_in_read_sheet(tmp_path: Path):
    """The review read a formula through openpyxl as its text ("=1+1") where `mlpsych agree` read its value (2):
    the changes the review keeps beside the workbook are matched to rows by their values."""
    from mlpsych import workbook

    path = results_sheet(tmp_path / "results.xlsx")
    rewritten(path, ANSWERS, _computed)
    values = workbook.read_values(path.read_bytes(), "answers")
    assert values[1][20:24] == [value for _, value in COMPUTED.values()]
    assert [read_sheet(path, "answers")[0][name] for name in COMPUTED] == values[1][20:24]


def test_an_empty_text_cell_reads_as_empty_in_the_review_as_in_read_sheet(tmp_path: Path):
    """The run's papers sheet writes an empty note as an empty inline string: openpyxl reads None, the review's
    reading read "" (now the reading of `mlpsych agree`, `eval --pred` too)."""
    from openpyxl import load_workbook

    from mlpsych import workbook

    path = results_sheet(tmp_path / "results.xlsx")
    assert b't="inlineStr"></c>' in zipfile.ZipFile(path).read("xl/worksheets/sheet1.xml")
    book = load_workbook(path, read_only=True, data_only=True)
    expected = [list(row) for row in book["papers"].iter_rows(values_only=True)]
    assert workbook.read_values(path.read_bytes(), "papers") == expected and None in expected[1]


def test_a_sheet_whose_size_is_written_wrong_or_not_at_all_is_read_whole(tmp_path: Path):
    """openpyxl's reader trusts a sheet's written size: some programs write "A1", and `mlpsych agree` then read no
    row (the review read them all); without a size, a row shorter than the header lacked its last columns' keys,
    which other rows have (blank)."""
    path = results_sheet(tmp_path / "results.xlsx")
    expected = read_sheet(path, "answers")
    rewritten(path, ANSWERS, lambda xml: re.sub(rb'<dimension ref="[^"]*"/>', b'<dimension ref="A1"/>', xml))
    assert read_sheet(path, "answers") == expected and len(expected) == 3
    rewritten(path, ANSWERS, lambda xml: re.sub(rb'<dimension ref="[^"]*"/>', b"", xml).replace(
        b'</sheetData>', b'<row r="9"><c r="A9" t="inlineStr"><is><t>B</t></is></c></row></sheetData>'))
    short = read_sheet(path, "answers")[-1]
    assert short.keys() == expected[0].keys() and short["paper_id"] == "B" and short["answer"] is None


def test_what_cannot_be_read_is_one_clear_error(tmp_path: Path):
    """A missing file, a file that is not a workbook (from bytes too), a missing sheet (named with those there),
    a column named twice, and a sheet openpyxl cannot parse: each an EvalInputError, as `mlpsych agree` reports."""
    path = results_sheet(tmp_path / "results.xlsx")
    with pytest.raises(EvalInputError, match="no such file"):
        read_sheet(tmp_path / "none.xlsx", "answers")
    (tmp_path / "text.xlsx").write_text("paper_id,answer\n", encoding="utf-8")
    for source in (tmp_path / "text.xlsx", b"not a workbook"):
        with pytest.raises(EvalInputError, match=r"cannot open as a workbook \(File is not a zip file\)"):
            read_sheet(source, "answers")
    with pytest.raises(EvalInputError, match=re.escape(f"no sheet named 'coding' (found: {', '.join(_sheets(path))})")):
        read_sheet(path, "coding")
    assert read_sheet(path, "coding", required=False) == []
    twice = tmp_path / "twice.xlsx"
    twice.write_bytes(path.read_bytes())
    rewritten(twice, ANSWERS, lambda xml: xml.replace(b"<t>notes</t>", b"<t>Answer </t>"))
    with pytest.raises(EvalInputError, match=r"two columns named alike \('answer' in columns E and S\)"):
        read_sheet(twice, "answers")
    rewritten(path, ANSWERS, lambda xml: xml.replace(b"</row>", b'<c r="U1"><f>1</f><v>1</v></row>', 1))
    with pytest.raises(EvalInputError, match="cannot open as a workbook"):
        read_sheet(path, "answers")


def test_a_sheet_missing_from_the_file_is_no_sheet(tmp_path: Path):
    """A workbook naming a sheet whose part it lacks: openpyxl left the sheet out; the review's reading looked for
    the part (a KeyError: "cannot open as a workbook")."""
    from mlpsych import workbook

    path = results_sheet(tmp_path / "results.xlsx")
    with zipfile.ZipFile(path) as archive:
        kept = {name: archive.read(name) for name in archive.namelist() if name != ANSWERS}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in kept.items():
            archive.writestr(name, data)
    with pytest.raises(EvalInputError, match="no sheet named 'answers'"):
        read_sheet(path, "answers")
    assert workbook.read_values(path.read_bytes(), "answers") is None


TYPED = {  # column: (value, number format) as a coder enters them in Excel
    "T": (datetime(2026, 11, 28, 9, 30), "yyyy-mm-dd h:mm"), "U": (date(2026, 11, 28), "mm-dd-yy"),
    "V": (datetime(2026, 1, 2), "[$-409]d mmm yyyy;@"), "W": (time(9, 30, 15), "h:mm:ss"),
    "X": (timedelta(hours=30, minutes=5), "[h]:mm:ss"), "Y": (0.375, "0.00%"), "Z": (1234.5, '"$"#,##0.00'),
    "AA": (-1234.5, "#,##0.00 [$€-407];[Red]-#,##0.00 [$€-407]"), "AB": (1234567890123, "0"),
    "AC": (-7, "General"), "AD": (1.5e-07, "0.00E+00"), "AE": (True, "General"), "AF": ("#N/A", "General"),
    "AG": ("n/a", "yyyy-mm-dd"), "AH": (None, "yyyy-mm-dd"), "AI": (datetime(1900, 1, 1), "d/m/yyyy")}
EXCEL_CELLS = {  # what Excel or LibreOffice write that openpyxl does not, at the end of row 2
    b'<c r="AJ2" t="inlineStr"><is><r><rPr><b/><sz val="11"/></rPr><t>bold</t></r><r><t xml:space="preserve"> plain'
    b'</t></r></is></c>': "bold plain",
    b'<c r="AK2" s="0" t="str"><f>A2&amp;"!"</f><v>A!</v></c>': "A!",
    b'<c r="AL2"><f t="shared" ref="AL2:AL4" si="0">1+1</f><v>2</v></c>': 2,
    b'<c r="AM2" t="d"><v>2026-11-28T09:30:00</v></c>': datetime(2026, 11, 28, 9, 30),
    b'<c r="AN2" t="d"><v>09:30:00</v></c>': time(9, 30),
    b'<c t="e" r="AO2" vm="1"><v>#VALUE!</v></c>': "#VALUE!",
    b'<c r="AP2" s="2" cm="1"><v/></c>': None,
    b'<c r="AQ2"><v>1.0</v></c>': 1.0, b'<c r="AR2"><v>-2.5E-3</v></c>': -0.0025,
    b'<c r="AS2" t="b"><v>0</v></c>': False, b'<c r="AT2" t="s"><v>0</v></c>': "paper_id",
    b'<c r="AU2" t="inlineStr"><is><t xml:space="preserve">  a &amp; b\r\n</t></is></c>': "  a & b\n",
    b'<c r="AV2"><v>-12345678901234567890</v></c>': -12345678901234567890}
RICH = (b'<si><r><rPr><b/><sz val="11"/><color theme="1"/><rFont val="Calibri"/><family val="2"/><scheme val="minor"/>'
        b'</rPr><t>car</t></r><r><rPr><sz val="11"/></rPr><t xml:space="preserve">et </t></r></si>')  # "caret "
PHONETIC = '<si><t>q2</t><rPh sb="0" eb="1"><t>キュー</t></rPh><phoneticPr fontId="1"/></si>'.encode()  # "q2"


def _coded_in_excel(tmp_path: Path, name: str, mac: bool = False) -> Path:
    """A results workbook a coder has coded in Excel and saved: dates, times, durations and numbers in formats
    (built in, custom, currency, percent; the 1904 date system with ``mac``), booleans, errors, text in shared
    strings, rich and phonetic text, formulas' values, ISO dates, cells of a style only, attributes in another order
    and Excel's extra ones, a trailing row of a height only."""
    from openpyxl import load_workbook
    from openpyxl.utils.datetime import CALENDAR_MAC_1904

    book = load_workbook(results_sheet(tmp_path / f"{name}-run.xlsx"))
    if mac:
        book.epoch = CALENDAR_MAC_1904
    sheet = book["answers"]
    for column, (value, number_format) in TYPED.items():
        sheet[f"{column}1"] = f"typed {column.lower()}"
        for row in (2, 3):
            sheet[f"{column}{row}"] = value
            sheet[f"{column}{row}"].number_format = number_format
    book.save(tmp_path / f"{name}-openpyxl.xlsx")
    path = saved_by_excel(tmp_path / f"{name}-openpyxl.xlsx", tmp_path / f"{name}.xlsx",
                          {"L": "0.00", "M": "#,##0", "J": "0%"})

    def cells(xml: bytes) -> bytes:
        second = xml.index(b"</row>", xml.index(b"</row>") + 1)
        xml = xml[:second] + b"".join(EXCEL_CELLS) + xml[second:]
        row = re.search(rb'<row r="3".*?</row>', xml, re.S)  # row 3: each cell's attributes in another order
        turned = re.sub(rb'<c r="(\w+)"( s="\d+")?( t="\w+")?', rb'<c\3\2 r="\1"', row.group())
        xml = xml[:row.start()] + turned + xml[row.end():]
        return xml.replace(b"</sheetData>", b'<row r="9" spans="1:1" ht="30" customHeight="1" x14ac:dyDescent="0.25"'
                                            b'/></sheetData>')

    rewritten(path, ANSWERS, cells)
    rewritten(path, "xl/sharedStrings.xml", lambda xml: xml.replace(b"<si><t>caret</t></si>", RICH).replace(
        b"<si><t>q2</t></si>", PHONETIC))
    return path


def test_a_sheet_coded_in_excel_is_read_here_as_openpyxl_reads_it(tmp_path: Path):
    """A coding saved from Excel (or LibreOffice) was read through openpyxl (7-11 s, not 3, for a 1,000-paper
    study's answers): shared strings, styles on numbers (a styled number may be a date), row spans, formulas,
    attributes in another order. Now read here, every sheet's values and types as openpyxl's reader gives them."""
    from mlpsych import workbook

    for name, mac in (("excel", False), ("mac", True)):
        path = _coded_in_excel(tmp_path, name, mac)
        assert b"date1904" in parts(path)["xl/workbook.xml"] if mac else True
        for sheet in _sheets(path):
            assert _plain(path, sheet), sheet
            expected = _openpyxl_values(path, sheet)
            values = workbook.read_values(path, sheet)
            assert values == expected
            assert [[type(v) for v in row] for row in values] == [[type(v) for v in row] for row in expected]
            rows = read_sheet(path, sheet)
            assert rows == openpyxl_rows(path, sheet) and rows == read_sheet(path.read_bytes(), sheet)
        answers = read_sheet(path, "answers")
        assert {c: answers[0][f"typed {c.lower()}"] for c in ("T", "U", "W", "X", "Y", "AB", "AF", "AG")} == {
            "T": TYPED["T"][0], "U": datetime(2026, 11, 28), "W": TYPED["W"][0], "X": TYPED["X"][0], "Y": 0.375,
            "AB": TYPED["AB"][0], "AF": "#N/A", "AG": "n/a"}
        values = workbook.read_values(path, "answers")
        assert values[1][-len(EXCEL_CELLS):] == list(EXCEL_CELLS.values())
        assert values[4:] == [[]] * 5 and values[2][0] == "A" and "caret " in {r["answer"] for r in answers}
        assert {r["question_id"] for r in answers} == {"q1", "q2"}


def test_what_is_not_read_here_exactly_is_read_by_openpyxl(tmp_path: Path):
    """A date outside the calendar (openpyxl warns and reads "#VALUE!"), a cell type openpyxl keeps as written, an
    inline string with phonetic runs, an escape XML lacks or a character it forbids, a comment among the cells: left
    to openpyxl, never read otherwise than it reads them (or where it fails). A row numbered before one read is left
    out here as openpyxl leaves it out."""
    from mlpsych import workbook

    base = _coded_in_excel(tmp_path, "excel")
    changes = {"date": lambda x: re.sub(rb'(<c r="T2" s="\d+"><v>)[^<]*', rb"\g<1>1E+10", x),
               "type": lambda x: x.replace(b'<c r="AQ2">', b'<c r="AQ2" t="x">'),
               "phonetic": lambda x: x.replace(b"<t>bold</t></r>", b'<t>bold</t></r><rPh sb="0" eb="1"><t>b</t></rPh>'),
               "comment": lambda x: x.replace(b'<row r="9"', b'<!-- a note --><row r="9"'),
               "order": lambda x: x.replace(b'<row r="9"', b'<row r="2"')}  # read here: openpyxl leaves it out
    for name, change in changes.items():
        path = tmp_path / f"{name}.xlsx"
        path.write_bytes(base.read_bytes())
        rewritten(path, ANSWERS, change)
        with pytest.warns(UserWarning) if name == "date" else contextlib.nullcontext():
            assert _plain(path, "answers") == (name == "order"), name
            assert workbook.read_values(path, "answers") == _openpyxl_values(path, "answers")
    for text in (b"&nbsp;", b"&#1;"):
        path = tmp_path / "escape.xlsx"
        path.write_bytes(base.read_bytes())
        rewritten(path, ANSWERS, lambda x: x.replace(b"a &amp; b", b"a " + text + b" b"))
        with pytest.raises(EvalInputError, match="cannot open as a workbook"):  # openpyxl's parser fails
            read_sheet(path, "answers")


def test_a_plain_sheet_reads_its_last_empty_row_and_any_true(tmp_path: Path):
    """mlpsych's own sheet, read here before too: a last row of a height only (as Excel keeps a row a coder made
    taller) was left out, where openpyxl reads an empty row; a true/false written 2 read as false (openpyxl: true)."""
    from mlpsych import workbook

    path = results_sheet(tmp_path / "results.xlsx")
    rewritten(path, ANSWERS, lambda xml: xml.replace(b'<v>1</v></c>', b'<v>2</v></c>', 1).replace(
        b"</sheetData>", b'<row r="7" ht="30" customHeight="1"/></sheetData>'))
    assert b't="b"><v>2</v>' in parts(path)[ANSWERS]
    assert _plain(path, "answers")
    values = workbook.read_values(path, "answers")
    assert values == _openpyxl_values(path, "answers") and len(values) == 7 and values[-1] == []


def test_shared_strings_read_here_as_openpyxl_reads_them(tmp_path: Path):
    """Excel keeps a workbook's text in one table of shared strings, which openpyxl's reader took 1.9 s to read for
    a 1,000-paper study (160,000 strings): read here, plain, rich and phonetic items, escapes, line ends and
    ``_x005F_`` as openpyxl reads them; what XML lacks or forbids left to openpyxl (which fails on it)."""
    from openpyxl.reader.strings import read_string_table

    from mlpsych.sheet_values import Unread, shared_strings

    xml = parts(_coded_in_excel(tmp_path, "excel"))["xl/sharedStrings.xml"].replace(b"</sst>", (
        b'<si><t>a_x005F_x000D_b &amp; c&#13;</t></si><si/><si><t xml:space="preserve"> x\r\n</t></si></sst>'))
    assert RICH in xml and PHONETIC in xml
    assert shared_strings(xml) == read_string_table(io.BytesIO(xml))
    for odd in (b"<!-- a note -->", b"<si><t>&nbsp;</t></si>", b"<si><t>\x01</t></si>", b"<si><x/></si><p/>"):
        with pytest.raises(Unread):
            shared_strings(xml.replace(b"</sst>", odd + b"</sst>"))
