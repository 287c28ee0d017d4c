"""A worksheet's cell values read from its XML directly, exactly as openpyxl's read-only reader gives them with
``data_only`` (mlpsych.workbook's fast path): that reader builds objects for every cell and takes about three times
as long (7-11 s, not 3, for the answers sheet of a 1,000-paper study).

What mlpsych and openpyxl write is read here, and what Excel and LibreOffice write when a coder saves the workbook:
shared strings, styles on numbers (a number in a date or time format is a datetime, date, time or timedelta, as
openpyxl makes it, in the workbook's 1900 or 1904 date system), row ``spans`` and heights, attributes in any order
and extra ones (``cm``, ``vm``, ``x14ac:dyDescent``), the main namespace under a prefix, rows and cells without their
(optional) numbers, formulas (their last computed value, as ``data_only`` reads them), ISO dates (``t="d"``), rich
inline text. Anything else (an unknown cell type, phonetic runs, a date outside the calendar, a comment, an encoding
other than UTF-8, XML not well formed) raises ``Unread``: the caller reads the sheet through openpyxl instead, so a
value here is never one openpyxl would not give.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAIN = b"http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_ROOT = re.compile(rb"<(?:(\w+):)?worksheet\b([^>]*)>")
_ENCODING = re.compile(rb'<\?xml[^>]*?\bencoding\s*=\s*["\']([\w.-]+)["\']')
_ATTRIBUTE = re.compile(rb'\s+([\w:.-]+)\s*=\s*(?:"([^"&<]*)"|\'([^\'&<]*)\')')
_SST = re.compile(rb"<sst\b([^>]*)>")
_ITEM = re.compile(rb'<si>(?:<t(?: xml:space="preserve")?>([^<]*)</t>|(.*?))</si>|<si/>', re.S)
_REFERENCE = re.compile(rb"([A-Z]{1,3})[1-9]\d*")
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # characters XML forbids: openpyxl's parser fails on them
_ESCAPE = re.compile(r"&(?:(amp|lt|gt|quot|apos)|#([0-9]+)|#x([0-9a-fA-F]+));")
_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


class Unread(Exception):
    """The sheet holds something read here otherwise than openpyxl reads it, or not at all: openpyxl reads it."""


@dataclass(frozen=True)
class NumberStyles:
    """What a workbook's styles say of its numbers, as openpyxl reads them (openpyxl.styles.stylesheet): the cell
    styles (a cell's ``s``) whose number format shows a date or time, those of them showing a duration
    (``[h]:mm:ss``), and the date system (1900; 1904 in old Mac workbooks)."""
    dates: frozenset[int]
    durations: frozenset[int]
    epoch: datetime


@dataclass(frozen=True)
class _Tags:
    """The expressions reading a worksheet whose main namespace has the prefix ``p`` (``b"x:"``, or none)."""
    items: re.Pattern  # a row's start tag, a row's end tag, or a whole cell
    content: re.Pattern  # a cell's content otherwise: formula, value, inline string, each optional, in that order
    plain: re.Pattern  # an inline string's one plain text
    runs: re.Pattern  # an inline string's rich runs, each with its text
    run_text: re.Pattern


@functools.lru_cache(maxsize=8)
def _tags(p: bytes) -> _Tags:
    text = rb"<" + p + rb"t\b[^>]*?(?:/>|>([^<]*)</" + p + rb"t\s*>)"
    return _Tags(
        items=re.compile(  # the common forms (a row's number first, a cell's r, s, t, one value) in groups of their own
            rb"<(?:" + p + rb'row(?: r="([0-9]+)")?(?=[\s/>])([^>]*?)(/?)>|(/)' + p + rb"row\s*>|" + p
            + rb'c(?: r="([A-Z]{1,3})[1-9][0-9]*"(?: s="([0-9]+)")?(?: t="([a-zA-Z]+)")?(?=/?>)|(?=[\s/>])([^>]*?))'
            + rb"(?:/>|>(?:<" + p + rb"v>([^<]*)</" + p + rb"v>|<" + p + rb"is><" + p + rb"t>([^<]*)</" + p + rb"t></"
            + p + rb"is>|(.*?))</" + p + rb"c\s*>))", re.S),
        content=re.compile(rb"\s*(?:<" + p + rb"f\b[^>]*?(?:/>|>[^<]*</" + p + rb"f\s*>)\s*)?(?:<" + p
                           + rb"v\s*(?:/>|>([^<]*)</" + p + rb"v\s*>)\s*)?(<" + p + rb"is\s*(?:/>|>(.*)</" + p
                           + rb"is\s*>)\s*)?", re.S),
        plain=re.compile(rb"\s*" + text + rb"\s*"),
        runs=re.compile(rb"(?:\s*<" + p + rb"r\s*>\s*(?:<" + p + rb"rPr\s*/>|<" + p + rb"rPr\b.*?</" + p
                        + rb"rPr\s*>)?\s*" + text + rb"\s*</" + p + rb"r\s*>)+\s*", re.S),
        run_text=re.compile(text),
    )


def shared_strings(xml: bytes) -> list[str]:
    """The workbook's table of shared strings (xl/sharedStrings.xml) as openpyxl's reader reads it (each item's text
    without its formatting or phonetic runs, ``_x005F_`` as ``_``): an item of plain text read here (openpyxl's
    reader took 1.9 s for the 160,000 of a 1,000-paper study saved by Excel), another by openpyxl's own code."""
    from openpyxl.cell.text import Text
    from openpyxl.xml.functions import fromstring

    root = _SST.search(xml[:2048])
    if root is None or _attributes(root.group(1)) is None or _attributes(root.group(1)).get(b"xmlns") != MAIN:
        raise Unread("a table of shared strings not in the main namespace without a prefix")
    end = xml.rfind(b"</sst>")
    body = xml[root.end():end] if end >= 0 else b"<!"
    if b"<!" in body or b"<?" in body or b"xmlns" in body or _CONTROL.search(body):
        raise Unread("a comment, CDATA, a namespace declared within the strings, or a character XML forbids")
    strings: list[str] = []
    tags_read = 0
    try:
        for found in _ITEM.finditer(body):
            plain, rich = found.groups()
            if plain is not None:
                tags_read += 4
                text = _text(plain)
            elif rich is not None:
                tags_read += 2 + rich.count(b"<")
                text = Text.from_tree(fromstring(b'<si xmlns="' + MAIN + b'">' + rich + b"</si>")).content
            else:
                tags_read += 1
                text = ""
            strings.append(text.replace("x005F_", "") if "x005F_" in text else text)
    except (ValueError, TypeError, UnicodeDecodeError, SyntaxError) as error:  # ElementTree's ParseError: Syntax
        raise Unread(str(error)) from error
    if tags_read != body.count(b"<"):
        raise Unread("an element read otherwise")
    return strings


def sheet_values(xml: bytes, strings: list[str], styles: NumberStyles) -> list[list[Any]]:
    """The values of the worksheet ``xml`` (its shared ``strings`` and number ``styles`` read by openpyxl), a list
    a row as openpyxl's read-only reader gives them with ``data_only`` (its size reset); raises Unread where that
    reader might give other values, or fail."""
    head = xml[:512]
    encoding = _ENCODING.search(head)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (encoding and encoding.group(1).lower() not in (b"utf-8",
                                                                                                      b"utf8")):
        raise Unread("not UTF-8")
    root = _ROOT.search(xml)
    attributes = _attributes(root.group(2)) if root else None
    prefix = root.group(1) if root else None
    if attributes is None or attributes.get(b"xmlns:" + prefix if prefix else b"xmlns") != MAIN:
        raise Unread("not a worksheet in the main namespace")
    p = prefix + b":" if prefix else b""
    found = re.compile(rb"<" + p + rb"sheetData\b[^>]*?(/?)>").search(xml, root.end())
    if found is None:
        raise Unread("no sheetData")
    if found.group(1):
        return []
    end = xml.find(b"</" + p + b"sheetData>", found.end())
    body = xml[found.end():end] if end >= 0 else b"<!"
    if b"<!" in body or b"<?" in body or b"xmlns" in body or _CONTROL.search(body):
        raise Unread("a comment, CDATA, a namespace declared within the cells, or a character XML forbids")
    try:
        return _rows(body, _tags(p), strings, styles)
    except (ValueError, IndexError, OverflowError, UnicodeDecodeError) as error:  # openpyxl decides (or fails)
        raise Unread(str(error)) from error


def _rows(body: bytes, tags: _Tags, strings: list[str], styles: NumberStyles) -> list[list[Any]]:
    """The rows of a sheet's ``<sheetData>`` content: each placed at its number (a row numbered at or before one
    read is left out, as openpyxl leaves it out), its cells at their columns, as wide as its last cell."""
    from openpyxl.utils import column_index_from_string

    table: list[list[Any]] = []
    cells: list[tuple[int, Any]] | None = None  # the open row's cells: (column, value)
    number = column = tags_read = 0
    columns: dict[bytes, int] = {}
    dated: dict[bytes | None, bool] = {}  # a cell style: whether it shows numbers as dates
    for found in tags.items.finditer(body):  # one at a time: all at once took twice the memory of the rows
        numbered, row, empty, ending, letters, style, kind, attributes, text, inline, inner = found.groups()
        if row is None and ending is None:  # a cell: most of what is found
            if cells is None:
                raise Unread("a cell outside a row")
            if attributes is not None:
                letters, style, kind = _cell_attributes(attributes)
            if letters is None:
                column += 1  # a cell without its reference follows the one before
            else:
                column = columns.get(letters) or columns.setdefault(letters, column_index_from_string(letters.decode()))
            if text is not None:  # <v>...</v> alone: 4 tags
                tags_read += 4
                if not text:
                    value: Any = None
                elif kind is None or kind == b"n":
                    value = float(text) if b"." in text or b"e" in text or b"E" in text else int(text)
                    if dated.get(style) if style in dated else dated.setdefault(style, _dated(style, styles)):
                        value = _date(value, style, styles)
                elif kind == b"s":
                    value = strings[int(text)]
                else:
                    value = _value(text, kind, style, strings, styles)
            elif inline is not None:  # <is><t>...</t></is>, one plain run: 6 tags
                tags_read += 6
                value = _text(inline) if kind == b"inlineStr" else _value(b"", kind, style, strings, styles)
            elif inner is not None:
                tags_read += 2 + inner.count(b"<")
                value = _content(inner, kind, style, tags, strings, styles)
            else:
                value = None
                tags_read += 1  # <c .../>
            cells.append((column, value))
        elif ending:
            if cells is None:
                raise Unread("a row ended twice")
            _place(table, number, cells)
            cells = None
            tags_read += 1
        else:
            if cells is not None:
                raise Unread("a row within a row")
            if numbered is None:
                named = _attributes(row)
                if named is None:
                    raise Unread("a row's attributes")
                numbered = named.get(b"r")
                if numbered is not None and not numbered.isdigit():
                    raise Unread("a row's number")  # openpyxl reads "2.0" as 2 and fails on others
            number, column = int(numbered) if numbered is not None else number + 1, 0
            tags_read += 1
            if empty:
                _place(table, number, [])
            else:
                cells = []
    if cells is not None or tags_read != body.count(b"<"):
        raise Unread("an element read otherwise")
    return table


def _place(table: list[list[Any]], number: int, cells: list[tuple[int, Any]]) -> None:
    """``table`` with the row ``number`` of ``cells``, as openpyxl's read-only reader places it."""
    if number <= len(table):
        return  # openpyxl leaves out a row numbered at or before one it gave
    table.extend([] for _ in range(number - 1 - len(table)))
    if not cells:
        table.append([])
        return
    width = cells[-1][0]  # openpyxl's row ends at its last cell, wherever the others are
    row: list[Any] = [None] * width
    for column, value in cells:
        if column <= width:
            row[column - 1] = value
    table.append(row)


def _cell_attributes(attributes: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
    """A cell's column letters, style and type from its attributes written in any order, with any others."""
    named = _attributes(attributes)
    if named is None:
        raise Unread("a cell's attributes")
    reference, style, kind = named.get(b"r"), named.get(b"s"), named.get(b"t")
    letters = None
    if reference:
        written = _REFERENCE.fullmatch(reference)
        if written is None:
            raise Unread("a cell's reference")
        letters = written.group(1)
    if style is not None and not style.isdigit():
        raise Unread("a cell's style")
    return letters, style, kind


def _attributes(text: bytes) -> dict[bytes, bytes] | None:
    """An element's attributes (a start tag's text after its name), by name; None where they are not only
    attributes."""
    named, at = {}, 0
    for attribute in _ATTRIBUTE.finditer(text):
        if attribute.start() != at:
            return None
        name, double, single = attribute.groups()
        named[name] = double if double is not None else single
        at = attribute.end()
    return named if not text[at:].strip() else None


def _content(inner: bytes, kind: bytes | None, style: bytes | None, tags: _Tags, strings: list[str],
             styles: NumberStyles) -> Any:
    """The value of a cell written otherwise than one ``<v>``: with a formula (its last value: ``data_only``), an
    empty value, or an inline string of rich runs."""
    found = tags.content.fullmatch(inner)
    if found is None:
        raise Unread("a cell's content")
    value, inline, content = found.groups()
    if kind != b"inlineStr":
        return _value(value or b"", kind, style, strings, styles)
    if inline is None:
        return None  # openpyxl reads an inline string's cell without one as empty
    if not content or not content.strip():
        return ""
    plain = tags.plain.fullmatch(content)
    if plain:
        return _text(plain.group(1) or b"")
    if tags.runs.fullmatch(content):
        return "".join(_text(text) for text in tags.run_text.findall(content))
    raise Unread("an inline string with phonetic runs, or with text beside its runs")


def _value(text: bytes, kind: bytes | None, style: bytes | None, strings: list[str], styles: NumberStyles) -> Any:
    """A cell's value from its ``<v>`` text, by its type ``t`` and (a number) its style, as openpyxl's
    WorkSheetParser.parse_cell makes it."""
    if not text:
        return None
    if kind is None or kind == b"n":
        number = float(text) if b"." in text or b"e" in text or b"E" in text else int(text)
        return _date(number, style, styles) if _dated(style, styles) else number
    if kind == b"s":
        return strings[int(text)]
    if kind == b"b":
        return bool(int(text))
    if kind in (b"str", b"e"):
        return _text(text)
    if kind == b"d":
        from openpyxl.utils.datetime import from_ISO8601

        return from_ISO8601(_text(text))
    if kind == b"inlineStr":
        return None  # its <v>, not its <is>
    raise Unread(f"a cell of type {kind!r}")


def _dated(style: bytes | None, styles: NumberStyles) -> bool:
    """Whether a number in the cell style ``style`` (none: the workbook's first) shows as a date or time."""
    return int(style or 0) in styles.dates


def _date(number: float, style: bytes | None, styles: NumberStyles) -> Any:
    """A number in a date or time style as openpyxl reads it: a datetime (a time below 1, a timedelta in a duration
    style); Unread outside the calendar, where openpyxl warns and reads "#VALUE!"."""
    from openpyxl.utils.datetime import from_excel

    return from_excel(number, styles.epoch, timedelta=int(style or 0) in styles.durations)


def _text(xml: bytes) -> str:
    """XML text as a parser reads it: line ends as one newline, characters escaped (``&amp;``, ``&#13;``) as they
    are; Unread for an escape XML lacks (``&nbsp;``) or a character it forbids (``&#1;``)."""
    text = xml.decode()
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "&" not in text:
        return text
    if text.count("&") != len(_ESCAPE.findall(text)):
        raise Unread("an escape XML lacks")
    return _ESCAPE.sub(_character, text)


def _character(escape: re.Match) -> str:
    name, decimal, hexadecimal = escape.groups()
    if name:
        return _NAMED[name]
    code = int(decimal) if decimal else int(hexadecimal, 16)
    if not (code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD
            or 0x10000 <= code <= 0x10FFFF):
        raise Unread("a character XML forbids")
    return chr(code)
