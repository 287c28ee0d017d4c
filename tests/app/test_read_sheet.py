"""read_sheet reads one sheet alone (mlpsych.workbook, as the review does; here beside the review's workbook tests,
whose builders it uses): openpyxl's read-only reader took 12-29 s for a 1,000-paper study's answers sheet in
`mlpsych agree`, `calibrate`, `adapt --coded` and `eval --pred`. Its rows must be those openpyxl's gave, whatever
wrote the workbook; benchmarks/read_sheet.py times the two."""

from __future__ import annotations

import re
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
from test_review import results_sheet
from test_review_workbook import DOCUMENTS, excel_like, parts, rewritten

from mlpsych.app.review import ReviewSheet
from mlpsych.errors import EvalInputError
from mlpsych.evaluation.evaluate import read_sheet
from tests.benchmarks.scripts import load_script

openpyxl_rows = load_script("read_sheet", "read_sheet_benchmark").openpyxl_rows

ANSWERS = "xl/worksheets/sheet2.xml"  # the answers sheet of a results workbook
COMPUTED = {"sum": (b"<f>1+1</f><v>2</v>", 2), "joined": (b'<f>A2&amp;"!"</f><v>A!</v>', "A!"),
            "truth": (b"<f>TRUE()</f><v>1</v>", True), "third": (b"<f>1/3</f><v>0.3333333333333333</v>", 1 / 3)}


def _sheets(path: Path) -> list[str]:
    from openpyxl import load_workbook

    book = load_workbook(path, read_only=True)
    book.close()
    return book.sheetnames


def _plain(path: Path, sheet: str) -> bool:
    """Whether the sheet is read here (not through openpyxl)."""
    from mlpsych import workbook

    reader = workbook._reader(path.read_bytes())
    with reader.archive:
        reader.read_strings()
        return workbook._plain_values(reader.archive.read(workbook._part(reader, sheet)), reader.shared_strings) \
            is not None


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


def _shared(path: Path, to: Path) -> Path:
    """The workbook with the answers sheet's text in a table of shared strings, as Excel writes it."""
    strings: list[bytes] = []

    def shared(cell: re.Match) -> bytes:
        strings.append(cell.group(2))
        return cell.group(1) + f't="s"><v>{len(strings) - 1}</v></c>'.encode()

    kept = parts(path)
    text = re.compile(rb'(<c r="[A-Z]+\d+"(?: s="\d+")? )t="inlineStr"><is>(.*?)</is></c>', re.S)
    kept[ANSWERS] = text.sub(shared, kept[ANSWERS])
    main = b"http://schemas.openxmlformats.org/"
    kept["xl/sharedStrings.xml"] = (b'<sst xmlns="' + main + b'spreadsheetml/2006/main">'
                                    + b"".join(b"<si>" + text + b"</si>" for text in strings) + b"</sst>")
    kept["[Content_Types].xml"] = kept["[Content_Types].xml"].replace(b"</Types>", (
        b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        b'spreadsheetml.sharedStrings+xml"/></Types>'))
    kept["xl/_rels/workbook.xml.rels"] = kept["xl/_rels/workbook.xml.rels"].replace(b"</Relationships>", (
        b'<Relationship Id="rIdStrings" Type="' + main + b'officeDocument/2006/relationships/sharedStrings" '
        b'Target="sharedStrings.xml"/></Relationships>'))
    with zipfile.ZipFile(to, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in kept.items():
            archive.writestr(name, data)
    return to


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
    """mlpsych's sheets, a reviewed one (text written by the review), a coding saved by openpyxl, the same with
    shared strings as Excel writes them (read here); another program's layout, a date and formulas (read through
    openpyxl): the same rows, values, types and
    row numbers as before; from bytes too. (Equal on the old reader as well: this is a speed change.)"""
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
    excel = _shared(edited, tmp_path / "excel.xlsx")
    computed = tmp_path / "computed.xlsx"
    computed.write_bytes(path.read_bytes())
    rewritten(computed, ANSWERS, _computed)
    assert all(_plain(p, "answers") for p in (path, reviewed, edited, excel))
    assert b't="s"' in parts(excel)[ANSWERS] and b"<is>" not in parts(excel)[ANSWERS]
    assert not any(_plain(p, "answers") for p in (other, saved, computed))
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
