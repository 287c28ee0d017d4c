"""Embedded PDF backend on pypdfium2 (PDFium, the engine of Chrome): no Java, per-character geometry.

PDFium gives characters in content-stream order with its own line breaks. We keep that order within a line but use
each line's box and font size: two-column pages are re-read left column first, and the cleaner gets positions
(running headers, footnotes at the page foot) and font sizes (footnotes, captions) that plain text lacks.
"""

from __future__ import annotations

import ctypes
import logging
import math
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from mlpsych.errors import IngestError
from mlpsych.ingest.base import Extraction, Line
from mlpsych.ingest.clean import body_font_size
from mlpsych.ingest.formats import CORRUPT_PDF

log = logging.getLogger(__name__)

NO_TEXT_LAYER = "no text layer (scanned image?): run OCR first, e.g. ocrmypdf"
ENCRYPTED = "encrypted PDF: password required"
LONG_DOCUMENT_PAGES = 300


def extract_pdf(path: Path, *, columns: bool = True) -> Extraction:
    """Lines of every page of ``path``; raises :class:`IngestError` with a short reason when it cannot be read."""
    try:
        document = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as error:
        raise IngestError(_open_error(error)) from None
    try:
        pages: list[list[Line]] = []
        two_column = 0
        failed: list[int] = []
        for index in range(len(document)):
            try:
                lines, is_two = _page_lines(document, index, columns)
            except pdfium.PdfiumError as error:
                log.warning("%s: page %d unreadable (%s)", path.name, index + 1, error)
                lines, is_two = [], False
                failed.append(index + 1)
            pages.append(lines)
            two_column += is_two
    finally:
        document.close()
    body = body_font_size(pages)
    for lines in pages:
        _mark_paragraphs(lines, body)
    extraction = Extraction(pages, {"n_pages": len(pages), "columns": {"two_column_pages": two_column}})
    _check_text_layer(path, extraction, failed)
    return extraction


def _open_error(error: Exception) -> str:
    message = str(error)
    if "password" in message.lower():
        return ENCRYPTED
    return f"{CORRUPT_PDF} ({message.strip().rstrip('.')})"


def _check_text_layer(path: Path, extraction: Extraction, failed: list[int]) -> None:
    """Raise for a PDF without text; note pages without text, unreadable pages and very long files in meta."""
    pages = extraction.pages
    if not pages:
        raise IngestError("PDF has no pages")
    if extraction.n_chars < 20:
        raise IngestError(NO_TEXT_LAYER)
    empty = [k + 1 for k, page in enumerate(pages) if not page and k + 1 not in failed]
    warnings: list[str] = []
    if empty:
        warnings.append(f"pages without text (images? OCR them to include them): {_ranges(empty)}")
    if failed:
        warnings.append(f"pages that could not be read: {_ranges(failed)}")
    if len(pages) > LONG_DOCUMENT_PAGES:
        warnings.append(f"very long document ({len(pages)} pages): a book or a whole volume rather than a paper?")
    for warning in warnings:
        log.warning("%s: %s", path.name, warning)
    if warnings:
        extraction.meta["warnings"] = warnings


def _ranges(numbers: list[int]) -> str:
    """"1-3, 7" from [1, 2, 3, 7]."""
    out: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def _page_lines(document: pdfium.PdfDocument, index: int, columns: bool) -> tuple[list[Line], bool]:
    page = document[index]
    try:
        width, height = page.get_size()
        textpage = page.get_textpage()
        try:
            lines = _read_lines(textpage, index, width, height)
        finally:
            textpage.close()
    finally:
        page.close()
    two_column = False
    if columns and lines:
        lines, two_column = order_columns(lines)
        if not two_column:
            lines = side_block_first(lines)
    lines = _join_row_pieces(lines, width, height)  # after the column order, which was judged on the pieces
    return lines, two_column  # paragraphs are marked once the document's body size is known


def _read_lines(textpage: pdfium.PdfTextPage, index: int, width: float, height: float) -> list[Line]:
    """Group PDFium's characters into lines (its own line breaks; a line-end hyphen U+FFFE also ends a line),
    leaving out footnote numbers printed raised after a word."""
    count = textpage.count_chars()
    raw = textpage.raw
    lines: list[Line] = []
    chars: list[str] = []
    boxes: list[tuple[float, float, float, float]] = []
    sizes: list[float] = []
    heavy: list[bool | None] = []  # per placed character: its letter set bold, or None for a character not a letter
    turned = 0  # characters of the line set at an angle
    last_turned = False
    marker: tuple[int, int] | None = None  # where a raised footnote number glued to a word starts (chars, boxes)

    def settle(following: str) -> None:
        """Drop a pending footnote number ("software³ to", printed raised and small) unless a letter or digit
        follows it: then it was part of the word."""
        nonlocal marker
        if marker is not None and not following.isalnum():
            del chars[marker[0]:], boxes[marker[1]:], sizes[marker[1]:], heavy[marker[1]:]
        marker = None

    def flush() -> None:
        nonlocal turned
        settle("")
        text = "".join(chars).strip()
        if text and boxes:
            left = min(b[0] for b in boxes)
            right = max(b[2] for b in boxes)
            top = max(b[3] for b in boxes)
            lines.append(
                Line(
                    text,
                    index,
                    y=max(0.0, (height - top) / height) if height else None,
                    size=statistics.median(sizes) if sizes else None,
                    x0=left / width if width else None,
                    x1=right / width if width else None,
                    rotated=turned > len(boxes) / 2,
                    bold=_all_bold(heavy),
                    bold_start=next((h for h in heavy if h is not None), False),
                )
            )
        chars.clear()
        boxes.clear()
        sizes.clear()
        heavy.clear()
        turned = 0

    for i in range(count):
        char = chr(pdfium_c.FPDFText_GetUnicode(raw, i))
        if char == "\n":
            flush()
            continue
        if char == "\r":
            continue
        if char in "\ufffe\x02":  # hyphen at a line end: PDFium glues the next line on, we split it off again
            settle("-")
            chars.append("-")
            flush()
            continue
        if char.isspace() or pdfium_c.FPDFText_IsGenerated(raw, i):
            settle(char)
            chars.append(char)
            continue
        box = textpage.get_charbox(i)
        if box[2] > box[0] or box[3] > box[1]:
            size = _font_size(raw, i)
            is_turned = _is_turned(pdfium_c.FPDFText_GetCharAngle(raw, i))
            if marker is not None:
                base = marker[1] - 1
                if not (char in _MARKER_CHARS and len(chars) - marker[0] < 8
                        and _raised_small(box, size, boxes[base], sizes[base])):
                    settle(char)
            elif (char.isdigit() and not is_turned and _ends_word(chars)
                  and _raised_small(box, size, boxes[-1], sizes[-1])):
                marker = (len(chars), len(boxes))
            if boxes and box[0] - boxes[-1][2] > max(7.0, 1.4 * size):
                flush()  # a jump across a gutter: PDFium glued two columns' lines that share a baseline
            elif boxes and not is_turned and not last_turned and _apart(box, boxes[-1], size):
                flush()  # a jump up or down the page: PDFium glued a page number onto a running head
            boxes.append(box)
            sizes.append(size)
            heavy.append(_is_bold(raw, i) if char.isalpha() else None)
            turned += is_turned
            last_turned = is_turned
        chars.append(char)
    flush()
    return lines


_CLOSED_UP = 0.15  # a gap under this share of the font size is no word space: the pieces are one word or statistic


def _join_row_pieces(lines: list[Line], width: float, height: float) -> list[Line]:
    """Join the pieces of one printed line that PDFium broke at a raised or lowered character ("χ2" + "(1, N = 20)",
    "L2" + "-loss", "R" + "d"): the next piece starts on the same row, closed up to the last one, so the text
    reads as printed ("χ2(1, N = 20) = 1"), not with a space or a paragraph break inside a statistic."""
    out: list[Line] = []
    for line in lines:
        last = out[-1] if out else None
        if (last is not None and not last.rotated and not line.rotated and width and height
                and None not in (last.x1, line.x0, last.y, line.y, last.size, line.size)):
            size = max(last.size, line.size)  # type: ignore[type-var]
            gap = (line.x0 - last.x1) * width  # type: ignore[operator]
            if -0.5 < gap < _CLOSED_UP * size and abs(line.y - last.y) * height < 0.6 * size:  # type: ignore[operator]
                longer = last if len(last.text) >= len(line.text) else line
                out[-1] = replace(last, text=last.text + line.text, x1=max(last.x1, line.x1),  # type: ignore[type-var]
                                  y=min(last.y, line.y), size=longer.size,  # type: ignore[type-var]
                                  bold=last.bold and line.bold, bold_start=last.bold_start)
                continue
        out.append(line)
    return out


# A footnote number or numbered citation: digits, or several numbers with commas and ranges ("software³,⁴",
# "studies⁷⁻⁹"), set after a word of three letters or more, or after the punctuation that closes a word ("words.¹",
# "2010).²"). "R²", "cm²" and "km²" stay: exponents follow one or two letters, a number or a bracket.
_MARKER_CHARS = frozenset("0123456789,-–")


def _ends_word(chars: list[str]) -> bool:
    """True when the characters read so far end with a word a footnote number can follow."""
    if len(chars) >= 3 and "".join(chars[-3:]).isalpha():
        return True
    return len(chars) >= 2 and chars[-1] in ".,;:" and not chars[-2].isspace()


def _raised_small(box: tuple[float, float, float, float], size: float,
                  base: tuple[float, float, float, float], base_size: float) -> bool:
    """True for a superscript: at most 85% of its base's font size, its foot a fifth of that size above the base's
    (acl-2014's marker: 8.0 pt on 10.9 pt, raised 4.0 pt)."""
    return size <= 0.85 * base_size and box[1] - base[1] >= 0.2 * base_size


def _is_bold(raw: object, index: int) -> bool:
    """True for a character set in a bold face: the font's weight (ITCGaramondStd-Bd 740, ArialMTStd-Bold 700), or
    its name where the font declares no weight (the standard Helvetica-Bold of a PDF that does not embed it)."""
    weight = pdfium_c.FPDFText_GetFontWeight(raw, index)
    if weight > 0:
        return weight >= 600
    name = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    if not pdfium_c.FPDFText_GetFontInfo(raw, index, name, len(name), ctypes.byref(flags)):
        return False
    return bool(_BOLD_NAME.search(name.value.decode("latin-1")))


_BOLD_NAME = re.compile(r"bold|black|heavy|demi|[-_]bd\b", re.IGNORECASE)  # "Helvetica-Bold", "Garamond-Bd"


def _all_bold(heavy: list[bool | None]) -> bool:
    """True when a line has letters (three or more) and every one is bold: a heading line, not a run-in heading
    ("Participants. Sixty students ...") or a bold word inside a sentence."""
    letters = [h for h in heavy if h is not None]
    return len(letters) >= 3 and all(letters)


def _apart(box: tuple[float, float, float, float], previous: tuple[float, float, float, float], size: float) -> bool:
    """True when two upright characters' boxes (left, bottom, right, top) are half a line or more apart
    vertically: they cannot be on one line (a superscript still overlaps its base)."""
    return box[3] < previous[1] - 0.5 * size or box[1] > previous[3] + 0.5 * size


def _is_turned(angle: float) -> bool:
    """True for a character rotated away from upright (PDFium gives radians in [0, 2π), -1 on error)."""
    return 0.05 < angle < 2 * math.pi - 0.05


def _font_size(raw: object, index: int) -> float:
    """Effective font size in points: PDFium's nominal size times the vertical scale of the text matrix
    (many journal PDFs set size 1 and scale the matrix, which the nominal size alone misses)."""
    matrix = pdfium_c.FS_MATRIX()
    nominal = pdfium_c.FPDFText_GetFontSize(raw, index)
    if pdfium_c.FPDFText_GetMatrix(raw, index, ctypes.byref(matrix)):
        scale = math.hypot(matrix.c, matrix.d)
        if scale > 0:
            return round(nominal * scale, 1)
    return round(nominal, 1)


def order_columns(lines: list[Line]) -> tuple[list[Line], bool]:
    """Reading order for a two-column page: between full-width lines, the left column top-down, then the right one.

    The gutter is the vertical line in the middle of the page crossed by the least text; the page counts as two
    columns only when both sides hold a fair share of the text and little text crosses it.
    """
    if any(line.x0 is None or line.x1 is None or line.y is None for line in lines):
        return lines, False
    total = sum(len(line.text) for line in lines) or 1
    best: tuple[int, float] | None = None
    for step in range(30, 71):
        x = step / 100
        crossing = sum(len(ln.text) for ln in lines if ln.x0 < x - 0.005 and ln.x1 > x + 0.005)  # type: ignore[operator]
        left = sum(len(ln.text) for ln in lines if ln.x1 <= x + 0.005)  # type: ignore[operator]
        right = total - crossing - left
        if left < 0.2 * total or right < 0.2 * total or crossing > 0.35 * total:
            continue
        if best is None or crossing < best[0]:
            best = (crossing, x)
    if best is None:
        return lines, False
    gutter = best[1]
    ordered: list[Line] = []
    left_col: list[Line] = []
    right_col: list[Line] = []

    def flush() -> None:
        ordered.extend(top_down(left_col))
        ordered.extend(top_down(right_col))
        left_col.clear()
        right_col.clear()

    for line in top_down(lines):
        if line.x0 < gutter - 0.005 and line.x1 > gutter + 0.005:  # type: ignore[operator]
            flush()
            ordered.append(line)
        elif line.x1 <= gutter + 0.005:  # type: ignore[operator]
            left_col.append(line)
        else:
            right_col.append(line)
    flush()
    return ordered, True


def side_block_first(lines: list[Line]) -> list[Line]:
    """A one-column page's side block (smaller text wholly beside the body: PLOS ONE's citation, licence,
    data-availability and funding notes) read first, top-down, and the body after it from a new paragraph.

    PDFium gives text in content order, which sets PLOS ONE's continued side block after the body's last line: the
    sentence that runs on to the next page was cut by the licence and funding statements. The block is kept (a
    data-availability or funding note can answer a question), only moved; lines without three letters (line
    numbers, page numbers) are never a side block.
    """
    placed = [ln for ln in lines if None not in (ln.x0, ln.x1, ln.y, ln.size) and not ln.rotated and ln.text.strip()]
    if len(placed) < 10:
        return lines
    sizes = sorted((ln.size, len(ln.text)) for ln in placed)  # type: ignore[type-var]
    half, seen = sum(n for _, n in sizes) / 2, 0
    body_size = next(size for size, n in sizes if (seen := seen + n) >= half)
    body = sorted(placed, key=lambda ln: ln.x0)  # type: ignore[arg-type,return-value]
    body = [ln for ln in body if abs(ln.size - body_size) < 0.5]  # type: ignore[operator]
    left = body[len(body) // 10].x0  # the body's left and right edges, a few indented or ragged lines aside
    right = sorted(ln.x1 for ln in body)[-1 - len(body) // 10]  # type: ignore[type-var]
    side = [ln for ln in placed if ln.size < body_size - 0.5  # type: ignore[operator]
            and (ln.x1 < left - _SIDE_GAP or ln.x0 > right + _SIDE_GAP)  # type: ignore[operator]
            and sum(c.isalpha() for c in ln.text) >= 3]
    if len(side) < 3 or sum(len(ln.text) for ln in side) > 0.5 * sum(len(ln.text) for ln in placed):
        return lines
    aside = {id(ln) for ln in side}
    rest = [ln for ln in lines if id(ln) not in aside]
    if rest:
        rest[0] = replace(rest[0], para_break=True)
    return top_down(side) + rest


_SIDE_GAP = 0.01  # share of the page width between a side block and the body


def top_down(lines: list[Line]) -> list[Line]:
    """Lines sorted top to bottom; pieces of one row (tops within a few points, e.g. a line split at a wide
    justified space, where capitals make one piece look higher) are kept left to right."""
    by_top = sorted(lines, key=lambda ln: ln.y)  # type: ignore[arg-type,return-value]
    out: list[Line] = []
    row: list[Line] = []
    for line in by_top:
        if row and line.y - row[0].y > 0.006:  # type: ignore[operator]
            out.extend(sorted(row, key=lambda ln: ln.x0))  # type: ignore[arg-type,return-value]
            row = []
        row.append(line)
    out.extend(sorted(row, key=lambda ln: ln.x0))  # type: ignore[arg-type,return-value]
    return out


def _mark_paragraphs(lines: list[Line], body: float | None) -> None:
    """A vertical gap well above the usual line spacing starts a new paragraph (headings, captions, blocks), and so
    does a heading line set next to the document's ``body`` text, and the body text after it
    (:func:`_heading_between`)."""
    gaps = [
        b.y - a.y  # type: ignore[operator]
        for a, b in zip(lines, lines[1:])
        if a.y is not None and b.y is not None and 0 < b.y - a.y < 0.1
    ]
    usual = statistics.median(gaps) if len(gaps) >= 3 else None
    for a, b in zip(lines, lines[1:]):
        if usual is not None and a.y is not None and b.y is not None and b.y - a.y > 1.6 * usual:
            b.para_break = True
        elif body is not None and _heading_between(a, b, body):
            b.para_break = True


def _heading_between(a: Line, b: Line, body: float) -> bool:
    """True when one of two lines in a row is a heading line and the other the document's body text: a heading
    often stands as close to its text as two lines of a paragraph do, so the gap alone missed it, and the heading
    opened the paragraph's first sentence ("Study 1: Machine Learning The goal of Study 1 ...") or closed the one
    before it.

    A heading line is larger than the body text ("Study 1: Machine Learning" at 12 pt over 10-pt text) or all bold
    at its size (PLOS ONE's section headings). Body text is set in the document's body size (not the page's: on a
    page of 8-pt tables, 10-pt text is no heading), upright and not bold; lines of other sizes (table cells,
    captions, footnotes) are never the body text of this rule. A run-in heading ("Participants. Sixty students
    ...") shares its line with the text, so its line is neither all bold nor larger; one longer than a line goes on
    in bold at the start of the next ("... in response to positive and" / "negative conditions. Prior to analysis
    ..."), which is therefore no body text after a heading."""
    return ((_heading_line(a, b) and _body_line(b, body, bold=b.bold_start))
            or (_heading_line(b, a) and _body_line(a, body, bold=a.bold)))


def _heading_line(line: Line, beside: Line) -> bool:
    """True when ``line`` is larger than the line ``beside`` it, or all bold at the same size."""
    if line.size is None or beside.size is None or line.rotated:
        return False
    return line.size > beside.size + _SAME_SIZE or (line.bold and abs(line.size - beside.size) <= _SAME_SIZE)


def _body_line(line: Line, body: float, *, bold: bool) -> bool:
    """True when ``line`` is upright text in the ``body`` size, and not ``bold`` (all bold before a heading, opening
    in bold after one)."""
    return line.size is not None and abs(line.size - body) <= _SAME_SIZE and not line.rotated and not bold


_SAME_SIZE = 0.5  # points: sizes closer than this are one size (PDFium rounds the effective size to 0.1 pt)


def page_count(path: Path) -> int:
    """Number of pages (used for seconds-per-page figures); 0 when the file cannot be opened."""
    try:
        document = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError:
        return 0
    try:
        return len(document)
    finally:
        document.close()
