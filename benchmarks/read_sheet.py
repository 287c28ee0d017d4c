"""How long `read_sheet` (what `mlpsych agree`, `calibrate`, `adapt --coded`, `eval --pred` and a rerun's check for
coding read a results workbook with) takes for one sheet, read alone (mlpsych.workbook) and as it was read before,
by openpyxl's read-only reader; the two readings' rows compared.

    PYTHONPATH=. python benchmarks/read_sheet.py big.xlsx                        # the answers sheet
    PYTHONPATH=. python benchmarks/read_sheet.py big.xlsx --sheet model_answers --repeats 3
    PYTHONPATH=. python benchmarks/read_sheet.py big.xlsx --excel big-excel.xlsx --format K=0.00%

``--excel OUT`` first writes the workbook as Excel saves it (``saved_by_excel``: shared strings, Excel's row and
sheet attributes, ``--format COLUMN=CODE`` styling a column's numbers of every sheet) to OUT, and times that. The
workbook is only read. Each reading runs ``--repeats`` times, alternating; the medians of wall and CPU seconds
are reported (each run as wall/CPU).
"""
from __future__ import annotations

import argparse
import io
import re
import statistics
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from mlpsych.evaluation.evaluate import read_sheet


def openpyxl_rows(source: Path | bytes, sheet: str) -> list[dict[str, Any]]:
    """A workbook sheet's rows as ``read_sheet`` read them through openpyxl's read-only reader (``data_only``) up to
    this change: the reference the fast reading must equal, and the "before" timed here."""
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(source) if isinstance(source, bytes) else source, read_only=True, data_only=True)
    try:
        values = book[sheet].iter_rows(values_only=True)
        header = next(values, None)
        if not header:
            return []
        names = [str(h).strip().lower() if h is not None else "" for h in header]
        rows = []
        for number, cells in enumerate(values, 2):
            if cells is None or all(c is None or str(c).strip() == "" for c in cells):
                continue
            rows.append({name: cell for name, cell in zip(names, cells) if name} | {"_row": number})
        return rows
    finally:
        book.close()


MAIN = b"http://schemas.openxmlformats.org/spreadsheetml/2006/main"
EXCEL_ROOT = (b'<worksheet xmlns="' + MAIN + b'" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/'
              b'relationships" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
              b'mc:Ignorable="x14ac xr xr2 xr3" xmlns:x14ac="http://schemas.microsoft.com/office/spreadsheetml/2009/9/'
              b'ac" xmlns:xr="http://schemas.microsoft.com/office/spreadsheetml/2014/revision" xmlns:xr2="http://'
              b'schemas.microsoft.com/office/spreadsheetml/2015/revision2" xmlns:xr3="http://schemas.microsoft.com/'
              b'office/spreadsheetml/2016/revision3" xr:uid="{00000000-0001-0000-0000-000000000000}">')
_CELL = re.compile(rb'<c r="([A-Z]+)\d+"( s="\d+")?(?: t="(\w+)")?(?:/>|>(.*?)</c>)', re.S)  # as openpyxl writes it


def saved_by_excel(source: Path, to: Path, formats: dict[str, str] | None = None) -> Path:
    """The workbook ``source`` (as mlpsych or openpyxl write it) written to ``to`` as Excel saves it: its text in a
    table of shared strings (each text once, rich runs kept), numbers without ``t="n"``, empty values as cells of a
    style only, rows with ``spans`` and ``x14ac:dyDescent``, Excel's namespaces on each sheet; ``formats`` (a column's
    letters: a number format code, built in or not) gives the numbers of that column a style of that format, as a
    coder formatting a column leaves them."""
    with zipfile.ZipFile(source) as archive:
        kept = {name: archive.read(name) for name in archive.namelist()}
    strings: dict[bytes, int] = {}
    uses = 0
    styles = _with_formats(kept, formats or {})

    def cell(found: re.Match) -> bytes:
        nonlocal uses
        letters, style, kind, inner = found.group(1), found.group(2) or b"", found.group(3), found.group(4) or b""
        head = b'<c r="' + found.group()[6:found.group().index(b'"', 6)] + b'"'
        if kind == b"inlineStr":
            text = re.fullmatch(rb"<is>(.*)</is>", inner, re.S)
            if text is None:
                return head + style + b"/>"  # an empty text: Excel keeps the cell's style alone
            uses += 1
            return head + style + b' t="s"><v>' + str(strings.setdefault(text.group(1), len(strings))).encode() + (
                b"</v></c>")
        if kind in (None, b"n"):
            if inner in (b"", b"<v></v>", b"<v/>"):
                return head + style + b"/>"
            style = styles.get(letters, style)
            return head + style + b">" + inner + b"</c>"
        return found.group()

    def row(found: re.Match) -> bytes:
        cells = _CELL.sub(cell, found.group(3))
        columns = [column_index_from_string(c.decode()) for c in re.findall(rb'<c r="([A-Z]+)', cells)]
        spans = f' spans="{min(columns)}:{max(columns)}"'.encode() if columns else b""
        return b'<row r="' + found.group(1) + b'"' + spans + found.group(2) + b' x14ac:dyDescent="0.25">' + cells + (
            b"</row>")

    from openpyxl.utils import column_index_from_string

    for name in [n for n in kept if n.startswith("xl/worksheets/sheet")]:
        xml = re.sub(rb"<worksheet\b[^>]*>", EXCEL_ROOT, kept[name], count=1)
        xml = re.sub(rb'<row r="(\d+)"([^>/]*)>(.*?)</row>', row, xml, flags=re.S)
        kept[name] = re.sub(rb'<row r="(\d+)"([^>/]*)/>', rb'<row r="\1"\2 x14ac:dyDescent="0.25"/>', xml)
    kept["xl/sharedStrings.xml"] = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<sst xmlns="' + MAIN
                                    + f'" count="{uses}" uniqueCount="{len(strings)}">'.encode()
                                    + b"".join(b"<si>" + text + b"</si>" for text in strings) + b"</sst>")
    kept["[Content_Types].xml"] = kept["[Content_Types].xml"].replace(b"</Types>", (
        b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        b'spreadsheetml.sharedStrings+xml"/></Types>'))
    kept["xl/_rels/workbook.xml.rels"] = kept["xl/_rels/workbook.xml.rels"].replace(b"</Relationships>", (
        b'<Relationship Id="rIdStrings" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        b'sharedStrings" Target="sharedStrings.xml"/></Relationships>'))
    with zipfile.ZipFile(to, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in kept.items():
            archive.writestr(name, data)
    return to


def _with_formats(parts: dict[str, bytes], formats: dict[str, str]) -> dict[bytes, bytes]:
    """The workbook's styles (``parts``' xl/styles.xml, changed) given a style of each number format of ``formats``;
    by column letters, the ``s`` attribute of that style."""
    from openpyxl.styles.numbers import BUILTIN_FORMATS_REVERSE

    if not formats:
        return {}
    xml = parts["xl/styles.xml"]
    count = int(re.search(rb'<cellXfs count="(\d+)"', xml).group(1))
    custom = re.findall(rb'<numFmt numFmtId="(\d+)"', xml)
    number, added, codes, styles = max([163] + [int(n) for n in custom]), b"", b"", {}
    for at, (letters, code) in enumerate(formats.items()):
        if code in BUILTIN_FORMATS_REVERSE:
            format_id = BUILTIN_FORMATS_REVERSE[code]
        else:
            number += 1
            format_id = number
            codes += f'<numFmt numFmtId="{number}" formatCode="{escape(code, {chr(34): "&quot;"})}"/>'.encode()
        added += (f'<xf numFmtId="{format_id}" fontId="0" fillId="0" borderId="0" xfId="0" '
                  f'applyNumberFormat="1"/>').encode()
        styles[letters.encode()] = f' s="{count + at}"'.encode()
    xml = re.sub(rb'<cellXfs count="\d+"', f'<cellXfs count="{count + len(formats)}"'.encode(), xml)
    xml = xml.replace(b"</cellXfs>", added + b"</cellXfs>")
    if codes:
        xml = re.sub(rb'<numFmts count="(\d+)"\s*/>', rb'<numFmts count="\1"></numFmts>', xml)
        if b"<numFmts" not in xml:
            xml = re.sub(rb"(<styleSheet\b[^>]*>)", rb'\1<numFmts count="0"></numFmts>', xml, count=1)
        more = codes.count(b"<numFmt ")
        xml = re.sub(rb'<numFmts count="(\d+)">', lambda f: f'<numFmts count="{int(f.group(1)) + more}">'.encode(), xml)
        xml = xml.replace(b"</numFmts>", codes + b"</numFmts>")
    parts["xl/styles.xml"] = xml
    return styles


@dataclass
class Timing:
    wall: float  # seconds
    cpu: float  # this process's CPU seconds: less swayed by other work on the machine


def timed(read, *args) -> tuple[Timing, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = read(*args)
    return Timing(time.perf_counter() - wall, time.process_time() - cpu), result


def summary(timings: list[Timing]) -> str:
    return (f"median {statistics.median(t.wall for t in timings):.2f} s wall, "
            f"{statistics.median(t.cpu for t in timings):.2f} s CPU  "
            f"({', '.join(f'{t.wall:.2f}/{t.cpu:.2f}' for t in timings)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workbook", type=Path)
    parser.add_argument("--sheet", default="answers")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--excel", type=Path, help="write the workbook as Excel saves it here, and time that")
    parser.add_argument("--format", action="append", default=[], metavar="COLUMN=CODE",
                        help="with --excel: a number format for a column's numbers (K=0.00%%)")
    args = parser.parse_args()
    if args.excel:
        args.workbook = saved_by_excel(args.workbook, args.excel, dict(f.split("=", 1) for f in args.format))
    before: list[Timing] = []
    after: list[Timing] = []
    for _ in range(args.repeats):
        timing, old = timed(openpyxl_rows, args.workbook, args.sheet)
        before.append(timing)
        timing, new = timed(read_sheet, args.workbook, args.sheet, True)
        after.append(timing)
    print(f"{args.workbook} ({args.workbook.stat().st_size / 1e6:.1f} MB), sheet {args.sheet!r}: {len(new)} rows, "
          f"{'equal' if new == old else 'DIFFERENT'} to openpyxl's")
    print(f"openpyxl read-only: {summary(before)}")
    print(f"read_sheet now:     {summary(after)}")


if __name__ == "__main__":
    main()
