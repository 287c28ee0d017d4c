"""One sheet of a results workbook, read alone, and written back row by row.

openpyxl reads (and writes) every sheet: at a 1,000-paper study's size (150 MB of XML, two thirds of it the
model_answers sheet) opening the review took 71-189 s and writing the coding 32-72 s, and reading the answers sheet
with its read-only reader (``mlpsych agree``, ``calibrate``, ``adapt --coded``, ``eval --pred``) 12-29 s. Here the
sheet is read alone (its cells' values as openpyxl reads them with ``data_only``: read in its XML, as mlpsych,
openpyxl, Excel and LibreOffice write it, by mlpsych.sheet_values, else by openpyxl's read-only reader) and the
review's coding is written by rewriting only the changed rows of that sheet's XML, every other part of the file
copied as it is (decompressed and compressed again by the standard library's zipfile; the workbook's time of last
change set to the write's): the other sheets, styles, widths, filters and lists stay exactly as they were, what
openpyxl would drop too. What a coder writes goes in as text cells (never a formula), styled as the cell
it replaces.
"""

from __future__ import annotations

import io
import logging
import re
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable
from xml.sax.saxutils import escape

from mlpsych.export import cell_value
from mlpsych.sheet_values import NumberStyles, Unread, shared_strings, sheet_values

logger = logging.getLogger(__name__)

Source = bytes | str | Path  # a workbook's bytes, or its path
Cells = dict[int, dict[int, Any]]  # row -> column -> value, numbered from 1 as a spreadsheet numbers them

_LATER = ("hyperlinks", "printOptions", "pageMargins", "pageSetup", "headerFooter", "rowBreaks", "colBreaks",
          "customProperties", "cellWatches", "ignoredErrors", "smartTags", "drawing", "legacyDrawing",
          "legacyDrawingHF", "drawingHF", "picture", "oleObjects", "controls", "webPublishItems", "tableParts",
          "extLst")  # what follows dataValidations in a worksheet (ECMA-376 CT_Worksheet), where a new list goes
_NUMBER = re.compile(rb'\br="(\d+)"')  # a row's number
_CORE = "docProps/core.xml"  # the package's core properties, where openpyxl and Excel write them


def read_values(source: Source, sheet: str) -> list[list[Any]] | None:
    """The cells' values of ``sheet`` in the workbook ``source`` (its bytes or its path), a list a row (row 1 first,
    each to its last cell), as openpyxl's reader gives them with ``data_only`` (a formula's value as last computed,
    not its text); None without that sheet. Raises what openpyxl raises for a file that is not a workbook."""
    from openpyxl import load_workbook

    reader = _reader(source)
    with reader.archive:
        part = _part(reader, sheet)
        if part is None:
            return None
        plain = _plain_values(reader, part)
    if plain is not None:
        return plain
    book = load_workbook(_opened(source), read_only=True, data_only=True)
    try:
        cells = book[sheet]
        cells.reset_dimensions()  # a size written wrong (some programs write "A1") would cut rows off
        return [list(row) for row in cells.iter_rows(values_only=True)]
    finally:
        book.close()


def sheet_names(source: Source) -> list[str]:
    """The names of the workbook's sheets, in its order (what openpyxl's ``sheetnames`` gives)."""
    reader = _reader(source)
    with reader.archive:
        return [found.name for found, rel in reader.parser.find_sheets() if rel.target in reader.valid_files]


def _plain_values(reader, part: str) -> list[list[Any]] | None:
    """The values of the sheet in ``part`` read from its XML (mlpsych.sheet_values: in a third of the time
    openpyxl's reader takes), None where that reading leaves it to openpyxl."""
    try:
        return sheet_values(reader.archive.read(part), _strings(reader), _number_styles(reader))
    except Unread as reason:
        logger.debug("the sheet is read by openpyxl: %s", reason)
        return None


def _strings(reader) -> list[str]:
    """The workbook's shared strings as openpyxl reads them: read here (mlpsych.sheet_values) where it can."""
    from openpyxl.xml.constants import SHARED_STRINGS

    found = reader.package.find(SHARED_STRINGS)
    if found is not None:
        try:
            return shared_strings(reader.archive.read(found.PartName[1:]))
        except Unread as reason:
            logger.debug("the shared strings are read by openpyxl: %s", reason)
    reader.read_strings()
    return reader.shared_strings


def _number_styles(reader) -> NumberStyles:
    """Which cell styles show a number as a date, time or duration, and the date system, as openpyxl reads them
    (its stylesheet applied to the reader's workbook, as its own loading does)."""
    from openpyxl.styles.stylesheet import apply_stylesheet

    apply_stylesheet(reader.archive, reader.wb)
    book = reader.wb
    try:  # what openpyxl's reader consults (private: an openpyxl that keeps them otherwise is read by openpyxl)
        return NumberStyles(frozenset(book._date_formats), frozenset(book._timedelta_formats), book.epoch)
    except AttributeError as error:
        raise Unread("this openpyxl keeps its number styles otherwise") from error


def write_cells(data: bytes, sheet: str, cells: Cells, lists: Iterable[bytes] = ()) -> bytes:
    """The workbook ``data`` with ``cells`` set in ``sheet`` (None empties a cell) and the data validations
    ``lists`` (XML elements) added to it."""
    reader = _reader(data)
    with reader.archive:
        part = _part(reader, sheet)
        changed = {part: _with_lists(_with_cells(reader.archive.read(part), cells), list(lists))}
        if _CORE in reader.archive.namelist():  # when the workbook was last changed, as Excel and Finder show it
            changed[_CORE] = _modified(reader.archive.read(_CORE), datetime.now(timezone.utc))
        return _rezip(reader.archive, changed)


def _opened(source: Source) -> str | Path | io.BytesIO:
    """What openpyxl opens ``source`` as: a path as it is (its members read as needed, not the whole file)."""
    return io.BytesIO(source) if isinstance(source, bytes) else source


def _reader(source: Source):
    """openpyxl's reader of the workbook ``source``, its sheets' names and parts read (not the sheets)."""
    from openpyxl.reader.excel import ExcelReader

    reader = ExcelReader(_opened(source), read_only=True, data_only=True)
    reader.read_manifest()
    reader.read_workbook()
    return reader


def _part(reader, sheet: str) -> str | None:
    """Where in the file the sheet named ``sheet`` is; None where the file lacks it (openpyxl then lacks the sheet
    too)."""
    return next((rel.target for found, rel in reader.parser.find_sheets()
                 if found.name == sheet and rel.target in reader.valid_files), None)


def _with_cells(xml: bytes, cells: Cells) -> bytes:
    """A worksheet's XML with ``cells`` set: the rows they are in rewritten, new rows put in order, the sheet's
    size widened; every other row left byte for byte."""
    found = re.search(rb"<(\w+:)?sheetData\b[^>]*?(/?)>", xml)
    if found is None:
        raise ValueError("a worksheet without sheetData")
    tag = (found.group(1) or b"").decode()
    start = found.end()
    end = start if found.group(2) else xml.index(f"</{tag}sheetData>".encode(), start)
    body, out, done, last = xml[start:end], [], 0, 0
    new = iter(sorted(cells))
    waiting = next(new, None)
    for row in re.finditer(rf"<{tag}row\b([^>]*)>".encode(), body):  # start tags only: 0.07 s, not 1 s, at 35,000
        numbered = _NUMBER.search(row.group(1))
        last = int(numbered.group(1)) if numbered else last + 1  # a row without its number follows the one before
        if waiting is None or waiting > last:
            continue
        out.append(body[done:row.start()])
        while waiting is not None and waiting < last:
            out.append(_row(b"", waiting, cells[waiting], tag))
            waiting = next(new, None)
        done = row.start()
        if waiting == last:
            ending = f"</{tag}row>".encode()
            done = row.end() if row.group(1).endswith(b"/") else body.index(ending, row.end()) + len(ending)
            out.append(_row(body[row.start():done], last, cells[last], tag))
            waiting = next(new, None)
    out.append(body[done:])
    while waiting is not None:
        out.append(_row(b"", waiting, cells[waiting], tag))
        waiting = next(new, None)
    rows = b"".join(out)
    opening = f"<{tag}sheetData>".encode() if found.group(2) else xml[found.start():start]
    closing = f"</{tag}sheetData>".encode() if found.group(2) else b""
    xml = xml[:found.start()] + opening + rows + closing + xml[end:]
    return _widened(xml, max(cells, default=1), max((max(c) for c in cells.values() if c), default=1))


def _row(element: bytes, number: int, values: dict[int, Any], tag: str) -> bytes:
    """A ``<row>`` with ``values`` set (``element`` empty: a new row); its other cells kept as they are."""
    from openpyxl.utils import column_index_from_string, get_column_letter

    head = re.match(rf"<{tag}row\b([^>]*?)/?>".encode(), element)
    attributes = re.sub(rb'\sspans="[^"]*"', b"", head.group(1)) if head else f' r="{number}"'.encode()
    kept: dict[int, bytes] = {}
    column = 0
    for cell in re.finditer(rf"<{tag}c\b[^>]*?(?:/>|>.*?</{tag}c>)".encode(), element[head.end():] if head else b"",
                            re.S):
        letters = re.search(rb'\br="([A-Z]+)\d+"', cell.group()[:cell.group().index(b">")])
        column = column_index_from_string(letters.group(1).decode()) if letters else column + 1
        kept[column] = cell.group()
    for column, value in values.items():
        before = kept.get(column, b"")
        style = re.search(rb'\ss="(\d+)"', before[:before.find(b">") + 1])
        kept[column] = _cell(f"{get_column_letter(column)}{number}", value, style.group(1) if style else b"", tag)
    cells = b"".join(kept[c] for c in sorted(kept))
    return f"<{tag}row".encode() + attributes + b">" + cells + f"</{tag}row>".encode()


def _cell(ref: str, value: Any, style: bytes, tag: str) -> bytes:
    """A cell's XML: a number, a true/false, or text as an inline string (text, never a formula)."""
    styled = f' r="{ref}"'.encode() + (b' s="' + style + b'"' if style else b"")
    if value is None:
        return f"<{tag}c".encode() + styled + b"/>"
    if isinstance(value, bool):
        kind, inner = ' t="b"', f"<{tag}v>{int(value)}</{tag}v>"
    elif isinstance(value, (int, float)):
        kind, inner = "", f"<{tag}v>{value!r}</{tag}v>"
    else:
        text = escape(cell_value(str(value)))
        kind, inner = ' t="inlineStr"', f'<{tag}is><{tag}t xml:space="preserve">{text}</{tag}t></{tag}is>'
    return f"<{tag}c".encode() + styled + kind.encode() + b">" + inner.encode("utf-8") + f"</{tag}c>".encode()


def _widened(xml: bytes, rows: int, columns: int) -> bytes:
    """The sheet's ``<dimension>`` (its used range, which readers trust) grown to hold row ``rows``, column
    ``columns``."""
    from openpyxl.utils import get_column_letter, range_boundaries

    found = re.search(rb'(<(?:\w+:)?dimension\b[^>]*?\bref=")([^"]*)"', xml)
    if found is None:
        return xml
    left, top, right, bottom = (n or 1 for n in range_boundaries(found.group(2).decode()))
    size = f"{get_column_letter(left)}{top}:{get_column_letter(max(right, columns))}{max(bottom, rows)}"
    return xml[:found.start(2)] + size.encode() + xml[found.end(2):]


def _with_lists(xml: bytes, lists: list[bytes]) -> bytes:
    """A worksheet's XML with the data validations ``lists`` added, where the schema puts them."""
    if not lists:
        return xml
    found = re.search(rb'<((?:\w+:)?)dataValidations\b[^>]*?\bcount="(\d+)"[^>]*>', xml)
    if found:
        tag = found.group(1).decode()
        end = xml.index(f"</{tag}dataValidations>".encode(), found.end())
        count = str(int(found.group(2)) + len(lists)).encode()
        return (xml[:found.start(2)] + count + xml[found.end(2):end] + b"".join(lists) + xml[end:])
    tag = (re.search(rb"<(\w+:)?worksheet\b", xml).group(1) or b"").decode()
    data_end = xml.rindex(b"sheetData")
    at = data_end + re.search(rf"<{tag}(?:{'|'.join(_LATER)})\b|</{tag}worksheet>".encode(), xml[data_end:]).start()
    block = f'<{tag}dataValidations count="{len(lists)}">'.encode() + b"".join(lists)
    return xml[:at] + block + f"</{tag}dataValidations>".encode() + xml[at:]


def _modified(xml: bytes, when: datetime) -> bytes:
    """The package's core properties (docProps/core.xml) with their ``dcterms:modified`` set to ``when`` (UTC), as
    Excel writes it (W3CDTF to the second: 2026-11-28T20:41:05Z); as they are without one."""
    stamp = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    return re.sub(rb"(<(?:\w+:)?modified\b[^>]*(?<!/)>)[^<]*(?=</(?:\w+:)?modified>)",
                  lambda found: found.group(1) + stamp, xml, count=1)


def _rezip(archive: zipfile.ZipFile, changed: dict[str, bytes]) -> bytes:
    """The zip ``archive`` with the parts named in ``changed`` replaced by their XML, every member written anew by
    the standard library's zipfile (at level 1: the 100 MB model_answers sheet of a 1,000-paper study in about 1.5 s,
    not 5), its name, time (a changed part's: now) and attributes kept."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as written:
        for info in archive.infolist():
            new = changed.get(info.filename)
            copy = zipfile.ZipInfo(info.filename, info.date_time if new is None else time.localtime()[:6])
            copy.external_attr, copy.compress_type = info.external_attr, zipfile.ZIP_DEFLATED
            written.writestr(copy, archive.read(info) if new is None else new)
    return out.getvalue()
