"""The one text normalization every paper's text passes on the way in, so no later stage meets text that cannot be
written as UTF-8.

Why: Python strings can hold what UTF-8 cannot. PDFium returns a character beyond the BMP - the mathematical italic
𝐾 (U+1D43E) a preprint sets its parameters in - as two UTF-16 halves (``'\\ud835\\udc3e'``); a broken ToUnicode map,
Tika, a CESU-8 text file or a ``\\ud835`` escape in a JSONL leaves a half alone. ``json.dumps(...)`` then fails in a
writer and ``Document.sha256`` fails in the pipeline, papers later. So every backend's text (pdfium, Tika, .txt,
.jsonl, text.json) goes through :func:`normalize_text` (or its page-keeping forms) before page ranges are built.

Unlike the optional ``unicode`` cleaning step (NFKC, quotes, ligatures: ``--no-clean unicode``) this always runs,
and it changes only what cannot be written or what no reader model can read:

* a surrogate pair becomes its code point; a lone surrogate and a non-character (U+FFFE/U+FFFF in every plane,
  U+FDD0-U+FDEF) become U+FFFD, which stays in the text so an answer or its evidence shows where something was lost;
* a Mathematical Alphanumeric Symbol (U+1D400-U+1D7FF) becomes its plain letter or digit (𝐾 -> K, 𝜆 -> λ): reader
  vocabularies know "K", and an answer a person types matches;
* C0 controls other than newline and tab, DEL and C1 controls are removed (NUL from a broken text layer); CR, CRLF,
  vertical tab, form feed and NEL become a newline;
* the result is NFC (a base letter and its combining accent become one character).

What changed is counted in a :class:`TextReport`, kept in ``Document.meta["cleaning"]["textnorm"]``
(``{"math_letters": 3, "math_mapped": {"U+1D43E": "K"}, ...}``).
Offsets stay exact: the text is cut into regions no rule looks across (a character below U+0300 never changes under
NFC and never composes with what precedes it), and only regions that change become edits, applied with
:func:`~mlpsych.ingest.clean.apply_edits`, which moves page ranges along.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from mlpsych.ingest.base import Line
from mlpsych.ingest.clean import apply_edits

REPLACEMENT = "\ufffd"

_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    re.escape(chr(plane + 0xFFFE)) + "-" + re.escape(chr(plane + 0xFFFF)) for plane in range(0, 0x110000, 0x10000)
)
_BREAKS = "\r\x0b\x0c\x85"  # line-separating controls: a newline
_DROPPED = "\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f"
_MATH = "\U0001d400-\U0001d7ff"
# One match per character (or pair) to change: the order of the alternatives matters (a pair before a lone half).
_FIX = re.compile(
    rf"\r\n|[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]|[{_NONCHARACTERS}]|[{_MATH}]|[{_BREAKS}{_DROPPED}]"
)
_LOW = "\x00-\u02ff"
# Independent regions: a run of characters from U+0300 on and of dropped controls (which glue their neighbours),
# with the character before it (an accent's base); or a line-separating control. Text outside them needs nothing.
_REGION = re.compile(rf"\r\n|[{_LOW}]?(?:[^{_LOW}]|[{_DROPPED}])+|[{_BREAKS}]")


@dataclass
class TextReport:
    """What normalization changed in one document (zero counts are left out of :meth:`as_dict`)."""

    surrogate_pairs: int = 0  # joined into one character
    lone_surrogates: int = 0  # -> U+FFFD
    noncharacters: int = 0  # -> U+FFFD
    controls: int = 0  # removed, or a newline for line-separating ones
    math_letters: int = 0  # mathematical alphanumerics mapped to plain letters and digits
    math_mapped: dict[str, str] = field(default_factory=dict)  # "U+1D43E" -> "K" for each distinct symbol met
    nfc_regions: int = 0  # stretches that NFC changed (decomposed accents, singletons)

    @property
    def changed(self) -> bool:
        return bool(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}


def _fix(match: re.Match[str], report: TextReport) -> str:
    """The replacement of one :data:`_FIX` match, counted."""
    piece = match.group()
    if piece == "\r\n":
        return "\n"
    if len(piece) == 2:
        report.surrogate_pairs += 1
        piece = piece.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        if not _FIX.fullmatch(piece):  # e.g. an emoji: nothing more to do
            return piece
    code = ord(piece)
    if 0xD800 <= code <= 0xDFFF:
        report.lone_surrogates += 1
        return REPLACEMENT
    if 0x1D400 <= code <= 0x1D7FF:
        plain = unicodedata.normalize("NFKC", piece)  # unassigned code points of the block stay as they are
        if plain != piece:
            report.math_letters += 1
            report.math_mapped.setdefault(f"U+{code:04X}", plain)  # a code, not the symbol: survives re-reading
        return plain
    if code < 0xA0:  # a control character
        report.controls += 1
        return "\n" if piece in _BREAKS else ""
    report.noncharacters += 1
    return REPLACEMENT


def _normalize_region(piece: str, report: TextReport) -> str:
    fixed = _FIX.sub(lambda m: _fix(m, report), piece)
    composed = unicodedata.normalize("NFC", fixed)
    if composed != fixed:
        report.nfc_regions += 1
    return composed


def normalization_edits(text: str, report: TextReport | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, replacement)`` edits that normalize ``text``; none for text that needs nothing (most text)."""
    report = report if report is not None else TextReport()
    if not _FIX.search(text) and unicodedata.is_normalized("NFC", text):
        return []
    edits: list[tuple[int, int, str]] = []
    for match in _REGION.finditer(text):
        new = _normalize_region(match.group(), report)
        if new != match.group():
            edits.append((match.start(), match.end(), new))
    return edits


def normalize_with_pages(
    text: str, pages: Sequence[tuple[int, int]], report: TextReport | None = None
) -> tuple[str, list[tuple[int, int]]]:
    """Normalized ``text`` and its page ranges moved along (a range edge inside a changed region is clamped to it)."""
    return apply_edits(text, list(pages), normalization_edits(text, report))


def normalize_text(text: str, report: TextReport | None = None) -> str:
    """``text`` safe to encode as UTF-8, with the changes counted in ``report``."""
    return normalize_with_pages(text, [], report)[0]


def normalize_lines(pages: Sequence[list[Line]], report: TextReport) -> list[list[Line]]:
    """Extracted lines with normalized text; lines left blank (only control characters) are dropped."""
    out: list[list[Line]] = []
    for page in pages:
        lines: list[Line] = []
        for line in page:
            text = normalize_text(line.text, report)
            if text.strip():
                lines.append(line if text == line.text else replace(line, text=text))
        out.append(lines)
    return out


def normalize_json(value: Any) -> Any:
    """Every string (keys too) of decoded JSON normalized: labels and notes of a hand-edited JSONL line."""
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, list):
        return [normalize_json(item) for item in value]
    if isinstance(value, dict):
        return {normalize_json(key): normalize_json(item) for key, item in value.items()}
    return value
