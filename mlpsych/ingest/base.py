"""Plain data passed from an extraction backend to the cleaner: lines with their page and, when known, geometry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Line:
    """One text line as laid out on a page.

    ``y`` is the vertical position of the line's top as a fraction of the page height (0 = top edge), ``size`` the
    median font size in points, ``x0``/``x1`` the horizontal extent as fractions of the page width; backends that
    know no geometry (Tika) leave them ``None`` and the cleaner falls back to line order.
    ``para_break`` marks a line that starts a new paragraph (a blank line or a block boundary in the source).
    ``rotated`` marks a line set at an angle (a margin stamp printed upwards, an axis label, a landscape table);
    ``bold`` a line whose letters are all set in a bold face (a heading at the body's size), ``bold_start`` one whose
    first letter is (also the rest of a bold run-in heading broken across lines); only pdfium knows them.
    """

    text: str
    page: int
    y: float | None = None
    size: float | None = None
    x0: float | None = None
    x1: float | None = None
    para_break: bool = False
    rotated: bool = False
    bold: bool = False
    bold_start: bool = False


@dataclass
class Extraction:
    """What a backend read from one file: its lines, page by page (page 0 first), and notes for ``Document.meta``.

    ``paged`` is False for a format without pages (Word, HTML, a text file without form feeds): its lines sit on
    one nominal page, which is no page a reader could turn to, so its answers get no page number.
    """

    pages: list[list[Line]]
    meta: dict[str, Any] = field(default_factory=dict)
    paged: bool = True

    @property
    def n_chars(self) -> int:
        return sum(len(line.text.strip()) for page in self.pages for line in page)


def lines_from_text(page_texts: list[str]) -> list[list[Line]]:
    """Split plain page texts into :class:`Line` lists; blank lines become paragraph breaks on the next line."""
    pages: list[list[Line]] = []
    for number, page_text in enumerate(page_texts):
        lines: list[Line] = []
        pending_break = False
        for raw in page_text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            if not raw.strip():
                pending_break = True
                continue
            lines.append(Line(raw.rstrip(), number, para_break=pending_break))
            pending_break = False
        pages.append(lines)
    return pages
