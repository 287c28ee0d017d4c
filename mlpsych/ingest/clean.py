"""Automatic cleaning of extracted paper text, with a page map that stays right after every cut.

The paper this toolkit follows cleaned its Tika output by hand (headers, footnotes, captions, references,
citations, two-column order). A researcher with 200 PDFs cannot, so each of those steps is a rule here, each can be
switched off, and each reports what it removed (``Document.meta["cleaning"]``) so a surprising result can be traced.

Line-level steps (margins, headers, footnotes, captions, references) drop lines or cut pieces out of them, which
keeps the page of every remaining character known; the text is then assembled (joining hyphenated line ends)
while recording where each page starts; character-level steps (citations) go through :func:`apply_edits`, which
moves the page ranges along, and leave reported statistics untouched (:mod:`mlpsych.ingest.statforms`).
"""

from __future__ import annotations

import bisect
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from mlpsych.errors import UnknownChoice
from mlpsych.ingest.base import Line
from mlpsych.ingest.margins import line_key, remove_margins, zone_indices
from mlpsych.ingest.statforms import protected_spans, without_overlaps

# Step names accepted by --no-clean (aliases map the words of the issue onto the steps).
_ALIASES = {
    "ligatures": "unicode",
    "dehyphenation": "hyphenation",
    "hyphens": "hyphenation",
    "footers": "headers",
    "page-numbers": "headers",
    "page_numbers": "headers",
    "bibliography": "references",
    "refs": "references",
    "reading-order": "columns",
    "two-column": "columns",
    "stamps": "margins",
    "notices": "margins",
}


@dataclass
class CleaningOptions:
    """One switch per cleaning step; all on by default (the paper's manual cleaning, automated)."""

    unicode: bool = True  # ligatures, soft hyphens, odd spaces and quotes normalized (NFKC)
    hyphenation: bool = True  # words broken across line ends re-joined; a closed-up dash at a line end too
    margins: bool = True  # margin/overlay text: rotated or beside the text block, download notices, page stamps
    headers: bool = True  # running headers/footers (lines repeated across pages) and page numbers dropped
    footnotes: bool = True  # small-font blocks at the foot of a page dropped (needs font sizes: pdfium backend)
    captions: bool = True  # "Figure 2. ..." / "Table 1: ..." caption lines dropped
    references: bool = True  # everything from the References/Bibliography heading to the end (or an appendix) cut
    citations: bool = True  # "(Smith et al., 2019)", "[12]", the "(2020)" of "Smith and Lee (2020)" removed
    columns: bool = True  # two-column pages read left column first (pdfium backend; Tika keeps PDF order)

    @classmethod
    def steps(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def normalize_step(cls, name: str) -> str:
        """The canonical step name for ``name`` (case and aliases tolerated); ``ValueError`` if unknown."""
        key = name.strip().lower()
        key = _ALIASES.get(key, key)
        if key not in cls.steps():
            raise UnknownChoice(f"unknown cleaning step {name!r}; choose from {', '.join(cls.steps())} or 'all'")
        return key

    @classmethod
    def disable(cls, names: str | Iterable[str] | None) -> "CleaningOptions":
        """All steps on except ``names`` (a list or a comma-separated string; ``"all"`` turns every step off)."""
        if names is None:
            return cls()
        items = names.split(",") if isinstance(names, str) else [p for n in names for p in str(n).split(",")]
        items = [item for item in (i.strip() for i in items) if item]
        if any(item.lower() == "all" for item in items):
            return cls.off()
        options = cls()
        for item in items:
            setattr(options, cls.normalize_step(item), False)
        return options

    @classmethod
    def off(cls) -> "CleaningOptions":
        """No cleaning at all: the backend's text as it came."""
        return cls(**{name: False for name in cls.steps()})

    def enabled(self) -> list[str]:
        return [name for name in self.steps() if getattr(self, name)]


@dataclass
class CleanResult:
    text: str
    pages: list[tuple[int, int]]
    report: dict[str, Any]


# ----------------------------------------------------------------------------------------------------------- unicode

_CHAR_MAP = str.maketrans(
    {
        "\u200b": "",
        "\u200c": "",
        "\u200d": "",
        "\u2060": "",
        "\ufeff": "",
        "\u2011": "-",  # non-breaking hyphen (the minus sign U+2212 stays: statistics are kept as printed)
        "\u2018": "'",  # typographic quotes (TeX's ' and ``...'', Word's autocorrect) -> ASCII, so an answer
        "\u2019": "'",  # typed with ASCII quotes ("Ward's method") still matches verbatim
        "\u201c": '"',
        "\u201d": '"',
        "\t": " ",
    }
)


# Superscripts and subscripts keep their form: NFKC would turn "χ²(2)" into "χ2(2)" and "η²p" into "η2p".
_SCRIPTS = re.compile(
    "([" + "".join(chr(c) for c in range(0x80, 0x10000)
                   if unicodedata.decomposition(chr(c)).startswith(("<super>", "<sub>"))) + "]+)"
)


# A run of hyphen characters holding a soft hyphen (U+00AD) or a Unicode hyphen (U+2010), and what ends the line.
_HYPHEN_RUN = re.compile(r"[-\u00ad\u2010\u2011]*[\u00ad\u2010][-\u00ad\u2010\u2011]*(?=(\s*$)?)")


def _one_hyphen(match: re.Match[str]) -> str:
    """One hyphen for a run that shows one ("-" + U+00AD + U+2010 from a preprint's glyph map); a soft hyphen alone
    is a break point: a hyphen at the end of a line (joined by de-hyphenation like any other), nothing elsewhere."""
    if match.group().strip("\u00ad") or match.group(1) is not None:
        return "-"
    return ""


def normalize_unicode(text: str) -> str:
    """Ligatures (ﬁ -> fi), full-width forms, odd spaces, hyphens and curly quotes mapped to plain characters.

    Superscripts, subscripts and the minus sign stay as printed (they are part of reported statistics).
    Control characters, surrogates and non-characters were handled before, always, by
    :mod:`mlpsych.ingest.textnorm`; its U+FFFD replacements are kept, so an answer shows where text was lost.
    """
    pieces = _SCRIPTS.split(_HYPHEN_RUN.sub(_one_hyphen, text).translate(_CHAR_MAP))
    return "".join(piece if k % 2 else unicodedata.normalize("NFKC", piece) for k, piece in enumerate(pieces))


# ----------------------------------------------------------------------------------------- running headers/footers

_PAGE_NUMBER = re.compile(
    r"^\s*(?:page\s*)?[-–—]?\s*(?:\d{1,4}|[ivxlc]{1,6})\s*[-–—]?(?:\s*(?:of|/)\s*\d{1,4})?\s*$", re.IGNORECASE
)
_ZONE = 3  # lines at the top and at the bottom of a page that may be running headers/footers


def remove_running_lines(pages: list[list[Line]]) -> tuple[list[list[Line]], dict[str, Any]]:
    """Drop lines repeated at the top/bottom of many pages (journal name, running title) and bare page numbers."""
    n_pages = len(pages)
    threshold = max(2, round(0.25 * n_pages))
    counts: Counter[str] = Counter()
    for page in pages:
        counts.update({line_key(page[i].text) for i in zone_indices(page, _ZONE)} - {"", "0"})
    repeated = {key for key, count in counts.items() if count >= threshold} if n_pages >= 2 else set()
    removed_running = removed_numbers = 0
    samples: list[str] = []
    out: list[list[Line]] = []
    for page in pages:
        drop: set[int] = set()
        for i in zone_indices(page, _ZONE):
            text = page[i].text
            if line_key(text) in repeated:
                drop.add(i)
                removed_running += 1
                if len(samples) < 5 and text.strip() not in samples:
                    samples.append(text.strip())
            elif i in zone_indices(page, 2) and _PAGE_NUMBER.match(text):
                drop.add(i)
                removed_numbers += 1
        out.append(_keep(page, drop))
    return out, {"lines": removed_running, "page_numbers": removed_numbers, "examples": samples}


def _keep(page: list[Line], drop: set[int]) -> list[Line]:
    """The page without the dropped lines; a paragraph break on a dropped line passes to the next kept one."""
    kept: list[Line] = []
    carry = False
    for i, line in enumerate(page):
        if i in drop:
            carry = carry or line.para_break
            continue
        if carry:
            line = replace(line, para_break=True)
            carry = False
        kept.append(line)
    return kept


# ------------------------------------------------------------------------------------------------------- footnotes


def body_font_size(pages: list[list[Line]]) -> float | None:
    """The font size most of the text is set in (weighted by characters), or None without size information."""
    weights: Counter[float] = Counter()
    for page in pages:
        for line in page:
            if line.size:
                weights[round(line.size, 1)] += len(line.text)
    return weights.most_common(1)[0][0] if weights else None


def remove_footnotes(pages: list[list[Line]]) -> tuple[list[list[Line]], dict[str, Any]]:
    """Drop small-font lines below all body text of a page (footnotes, affiliations, notes at the page foot)."""
    body = body_font_size(pages)
    if body is None:
        return pages, {"lines": 0, "note": "no font sizes from this backend"}
    small_limit = body * 0.88
    removed = 0
    out: list[list[Line]] = []
    for page in pages:
        body_lines = [ln for ln in page if ln.size and ln.size >= small_limit and ln.y is not None]
        drop: set[int] = set()
        for i, line in enumerate(page):
            if not line.size or line.size >= small_limit or line.y is None or line.y < 0.5 or not body_lines:
                continue
            above = [b for b in body_lines if _overlaps(b, line)] or body_lines
            if all(b.y is not None and b.y < line.y for b in above):
                drop.add(i)
        removed += len(drop)
        out.append(_keep(page, drop))
    return out, {"lines": removed, "body_size": body}


def _overlaps(a: Line, b: Line) -> bool:
    if a.x0 is None or a.x1 is None or b.x0 is None or b.x1 is None:
        return True
    return a.x0 < b.x1 and b.x0 < a.x1


# -------------------------------------------------------------------------------------------------------- captions

_CAPTION = re.compile(r"^\s*(?:Fig(?:ure)?\.?|Table|Tab\.)\s*(?:S?\d+|[IVX]+)[a-z]?\s*(?:[.:|—–]|$)", re.IGNORECASE)
_CAPTION_BARE = re.compile(r"^\s*(?:Figure|Table)\s+(?:S?\d+|[IVX]+)\s*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?][\"'”’)]*\s*$")


def remove_captions(pages: list[list[Line]], body_size: float | None) -> tuple[list[list[Line]], dict[str, Any]]:
    """Drop figure/table captions: the "Figure N." line and its continuation (same small font, or up to its
    first full stop when sizes are unknown), and APA's bare "Table 1" line with the title line under it.

    A caption starts a block: a "Table 1." that ends a body sentence broken across lines ("see the far-right
    column of" / "Table 1.") is body text, and so is what follows it.
    """
    removed = 0
    skipped = 0
    out: list[list[Line]] = []
    for page in pages:
        drop: set[int] = set()
        i = 0
        while i < len(page):
            line = page[i]
            if not _CAPTION.match(line.text):
                i += 1
                continue
            if not _starts_block(page, i):
                skipped += 1
                i += 1
                continue
            drop.add(i)
            j = i + 1
            if _CAPTION_BARE.match(line.text):
                if j < len(page) and not _SENTENCE_END.search(page[j].text) and len(page[j].text) < 120:
                    drop.add(j)
                    j += 1
            else:
                j = _caption_continuation(page, i, body_size, drop)
            i = j
        removed += len(drop)
        out.append(_keep(page, drop))
    return out, {"lines": removed, "kept_mid_sentence": skipped}


def _starts_block(page: list[Line], i: int) -> bool:
    """True when ``page[i]`` begins a block: first on its page, after a paragraph break, after a finished
    sentence, or in another font size than the line before it."""
    if i == 0 or page[i].para_break:
        return True
    before, line = page[i - 1], page[i]
    if _SENTENCE_END.search(before.text):
        return True
    return bool(before.size and line.size and abs(before.size - line.size) >= 0.6)


def _caption_continuation(page: list[Line], start: int, body_size: float | None, drop: set[int]) -> int:
    """Mark the caption lines after ``page[start]`` and return the index of the first line after the caption."""
    head = page[start]
    j = start + 1
    if head.size and body_size and head.size < body_size * 0.95:
        while j < len(page) and page[j].size and abs(page[j].size - head.size) < 0.6 and j - start <= 12:
            drop.add(j)
            j += 1
        return j
    if _SENTENCE_END.search(head.text):
        return j
    while j < len(page) and j - start <= 4 and not page[j].para_break:
        drop.add(j)
        j += 1
        if _SENTENCE_END.search(page[j - 1].text):
            break
    return j


# ------------------------------------------------------------------------------------------------------ references

_REF_HEADING = re.compile(
    r"^\s*(?:[0-9IVX]+\.?\s*)?(?:references(?:\s+and\s+notes)?|bibliography|works\s+cited|literature\s+cited"
    r"|reference\s+list|cited\s+literature|literatur(?:verzeichnis)?)\s*:?\s*$",
    re.IGNORECASE,
)
_AFTER_REFS = re.compile(
    r"^\s*(?:[A-Z0-9]\.?\s*)?(?:appendix|appendices|supplementa(?:l|ry)\b|supporting\s+information|online\s+supplement)",
    re.IGNORECASE,
)


def cut_references(pages: list[list[Line]]) -> tuple[list[list[Line]], dict[str, Any]]:
    """Cut from the last References/Bibliography heading (in the later part of the text) up to an appendix or the end."""
    positions = [(p, i) for p, page in enumerate(pages) for i in range(len(page))]
    if not positions:
        return pages, {"cut": False}
    earliest = int(len(positions) * 0.3)
    heading = None
    for k in range(len(positions) - 1, earliest - 1, -1):
        p, i = positions[k]
        if _REF_HEADING.match(pages[p][i].text):
            heading = k
            break
    if heading is None:
        return pages, {"cut": False}
    end = len(positions)
    for k in range(heading + 1, len(positions)):
        p, i = positions[k]
        text = pages[p][i].text
        if len(text) < 80 and _AFTER_REFS.match(text):
            end = k
            break
    doomed = set(positions[heading:end])
    out = [[ln for i, ln in enumerate(page) if (p, i) not in doomed] for p, page in enumerate(pages)]
    p0, _ = positions[heading]
    return out, {"cut": True, "page": p0 + 1, "lines": len(doomed), "resumed_at_appendix": end < len(positions)}


# -------------------------------------------------------------------------------------------------------- assembly

_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_TRAILING_HYPHEN = re.compile(r"(\S*?)([^\W\d_]+)-$")
_LAST_WORD_CHARS = 120  # searched for a line-end hyphen: the search is cubic in the length of a line without spaces
_LEADING_WORD = re.compile(r"^(\w+)")
_LEADING_COMPOUND = re.compile(r"^[^\W\d_]+-[^\W\d_]+")
# An en or em dash closed up to the word before it ("countries—", "pages 117–") at a line end: the line break
# is not a space, the next word belongs right after the dash ("countries—Ireland", "117–122"). A spaced dash
# ("word —") has a space before it and is left alone.
_TRAILING_CLOSED_DASH = re.compile(r"[^\s\u2013\u2014][\u2013\u2014]$")


def _vocabulary(pages: list[list[Line]]) -> Counter[str]:
    """Word counts of the document, hyphenated compounds also counted pairwise (for de-hyphenation decisions).

    The pieces of words broken at line ends ("meth-" / "ods") are left out: they are what is being decided.
    """
    vocab: Counter[str] = Counter()
    broken = False
    for page in pages:
        for line in page:
            tokens = line.text.lower().split()
            if broken and tokens:
                tokens = tokens[1:]
            broken = line.text.rstrip().endswith("-")
            if broken and tokens:
                tokens = tokens[:-1]
            for token in _WORD.findall(" ".join(tokens)):
                vocab[token] += 1
                parts = token.split("-")
                if len(parts) > 1:
                    vocab.update(parts)
                for a, b in zip(parts, parts[1:]):
                    vocab[f"{a}-{b}"] += 1
    return vocab


# Endings that are syllables, never words of their own, after a line-end hyphen.
_SUFFIX_FRAGMENTS = frozenset(
    "tion tions sion sions ment ments ting ing ings ness ity ities ence ences ance ances ally ly ed er ers ies ive "
    "ives able ible ous ical ically ist ists ism isms ize ized izes ise ised ation ations ology ological ent ents "
    "ant ants ial ially ure ures ful ory ories ate ated ates ating tive tively ted ter ters cal tic tics".split()
)


def _hyphen_decision(left: str, right: str, vocab: Counter[str], compound: bool = False,
                     page_break: bool = False) -> Literal["join", "keep", "break"]:
    """What to do with the line-end hyphen between ``left`` and ``right``: drop it and join the word ("join"), keep
    it and close up ("keep"), or keep it and go on after a separator ("break").

    The document's own spelling decides first: "meth-" + "ods" joins when "methods" occurs elsewhere, and so do
    "LAS-" + "SO" or "miss-" + "Forest"; "cross-" + "validation" keeps its hyphen when the text writes
    "cross-validation". Without evidence: a left part that already holds a hyphen ("stay-at-" + "home"), a capital
    after the break, or two words in their own right ("closed-" + "form") keep it; anything else joins. Across a
    ``page_break`` a capital may open a table or figure set at the next page's top rather than finish the word
    ("the dimen-" + "Training"): without that evidence the hyphen stays where the page ended.
    """
    if not right[:1].isalpha():
        return "keep"  # "COVID-" + "19"
    joined, hyphenated = (left + right).lower(), f"{left}-{right}".lower()
    if vocab[joined] and not vocab[hyphenated]:
        return "join"
    if right.lower() in _SUFFIX_FRAGMENTS and not vocab[hyphenated]:
        return "join"  # "over-fit-" + "ting": a syllable, not a word
    if left.isupper() and right.isupper() and len(left) + len(right) <= 8:
        return "join"  # an acronym broken in two: "LAS-" + "SO"
    if compound or vocab[hyphenated]:
        return "keep"
    if not right[:1].islower():
        return "break" if page_break and right[:1].isupper() else "keep"
    if len(left) > 1 and len(right) > 1 and vocab[left.lower()] and vocab[right.lower()]:
        return "keep"
    return "join"


def _median_length(pages: list[list[Line]]) -> float:
    lengths = [len(line.text) for page in pages for line in page if line.text.strip()]
    return statistics.median(lengths) if lengths else 0.0


def assemble(pages: list[list[Line]], dehyphenate: bool) -> tuple[str, list[tuple[int, int]], dict[str, Any]]:
    """Join lines into running text (paragraphs on their own lines) and record each page's character range."""
    vocab = _vocabulary(pages) if dehyphenate else Counter()
    typical = _median_length(pages)
    parts: list[str] = []
    length = 0
    ranges: list[tuple[int, int]] = []
    joined = kept = dashes = 0
    prev: Line | None = None
    for page in pages:
        page_start: int | None = None
        for line in page:
            text = line.text.strip()
            if not text:
                continue
            if prev is not None:
                tail = parts[-1][-_LAST_WORD_CHARS:]
                hyphen = _TRAILING_HYPHEN.search(tail) if dehyphenate and tail.endswith("-") else None
                lead = _LEADING_WORD.match(text)
                closed_up = False  # the line runs on from the previous one without a separator
                if hyphen and lead:
                    # a compound on the left ("stay-at-" + "home") keeps its hyphen, and so does one on the right
                    # that the paper writes elsewhere ("eight-" + "year-olds" beside "nine-year-olds"; not "scik-" +
                    # "it-learn")
                    right = _LEADING_COMPOUND.match(text)
                    compound = "-" in hyphen.group(1) or bool(right and vocab[right.group().lower()])
                    decision = _hyphen_decision(hyphen.group(2), lead.group(1), vocab, compound,
                                                page_break=line.page != prev.page)
                    if decision == "join":
                        parts[-1] = parts[-1][:-1]
                        length -= 1
                        joined += 1
                    elif decision == "keep":
                        kept += 1
                    closed_up = decision != "break"
                elif dehyphenate and lead and _TRAILING_CLOSED_DASH.search(tail):
                    dashes += 1
                    closed_up = True
                if not closed_up:
                    sep = _separator(prev, line, typical)
                    parts.append(sep)
                    length += len(sep)
            if page_start is None:
                page_start = length
            parts.append(text)
            length += len(text)
            prev = Line(text, line.page, size=line.size)
        ranges.append((page_start, length) if page_start is not None else (length, length))
    report = {"joined": joined, "kept_hyphen": kept, "dash_closed_up": dashes}
    return "".join(parts), _fill_empty_ranges(ranges), report


def _fill_empty_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Pages left empty get a zero-length range at the start of the next non-empty page, so starts never go back."""
    out = list(ranges)
    for k in range(len(out) - 2, -1, -1):
        start, end = out[k]
        if start == end:
            nxt = out[k + 1][0]
            out[k] = (min(start, nxt), min(start, nxt))
    return out


def _separator(prev: Line, line: Line, typical: float) -> str:
    """Newline between paragraphs (explicit break, a short line ending a sentence, a heading), else a space."""
    if line.para_break:
        return "\n"
    short = typical and len(prev.text) < 0.7 * typical
    if short and _SENTENCE_END.search(prev.text):
        return "\n"
    if typical and len(prev.text) < 0.4 * typical and not prev.text.rstrip().endswith((",", ";", "-")):
        return "\n"
    return " "


# ------------------------------------------------------------------------------------------------------- citations

_YEAR = r"(?:(?:19|20)\d{2}[a-z]?|in\s+press|n\.\s?d\.|forthcoming)"
_YEARS = rf"{_YEAR}(?:\s*,\s*{_YEAR})*"
_LOCATOR = r"(?:\s*,\s*(?:pp?\.|ch\.|chap\.|Study|Exp\.|para\.)\s*[\dA-Z]+(?:\s*[-–]\s*\d+)?)?"
_CITE_PART = re.compile(
    rf"(?:(?:e\.g\.|i\.e\.|cf\.|see(?:\s+also)?|for\s+(?:a\s+)?(?:reviews?|an?\s+overview),?\s+see)[,\s]+)?"
    rf"(?=[^\d()\[\];]*[A-Z])[^\W\d_][^\d()\[\];]{{0,240}}?,?\s+{_YEARS}{_LOCATOR}\s*",
)
_PAREN = re.compile(r"\(([^()]{2,600})\)")
_NARRATIVE = re.compile(rf"(?<=[A-Za-z\u00C0-\u024F.])(\s*\(\s*{_YEARS}{_LOCATOR}\s*\))")
_NARRATIVE_NAME = re.compile(r"(?:\b[A-Z][\w'’\-]*|\bal\.)\s*$")
_NUMERIC = re.compile(r"\s?\[\s*\d{1,3}(?:\s*[-–,]\s*\d{1,3})*\s*\]")
_NUMERIC_RANGE = re.compile(r"(\d+)\s*[-–]\s*(\d+)")  # "15–20" of "[6,10,15–20]": a citation range runs upward


def find_citations(text: str) -> tuple[list[tuple[int, int, str]], dict[str, int]]:
    """Edits ``(start, end, replacement)`` that remove in-text citations while leaving "(SVM)" or "(N = 120)" alone."""
    edits: list[tuple[int, int, str]] = []
    stats = {"parenthetical": 0, "narrative_year": 0, "numeric": 0, "partial": 0}
    for match in _PAREN.finditer(text):
        parts = match.group(1).split(";")
        is_cite = [bool(_CITE_PART.fullmatch(part.strip() + " ")) for part in parts]
        if all(is_cite):
            edits.append(_with_space(text, match.start(), match.end()))
            stats["parenthetical"] += 1
        elif any(is_cite):
            kept = "; ".join(part.strip() for part, cite in zip(parts, is_cite) if not cite)
            edits.append((match.start(), match.end(), f"({kept})"))
            stats["partial"] += 1
    for match in _NARRATIVE.finditer(text):
        if _NARRATIVE_NAME.search(text, max(0, match.start() - 60), match.start()):
            edits.append((match.start(1), _past_second_period(text, match.start(1), match.end(1)), ""))
            stats["narrative_year"] += 1
    for match in _NUMERIC.finditer(text):
        numbers = [int(n) for n in re.findall(r"\d+", match.group())]
        ranges = [(int(a), int(b)) for a, b in _NUMERIC_RANGE.findall(match.group())]
        if all(n > 0 for n in numbers) and all(a < b for a, b in ranges):  # "[200–1,500]" is a range of values
            edits.append((match.start(), _past_second_period(text, match.start(), match.end()), ""))
            stats["numeric"] += 1
    return edits, stats


def _past_second_period(text: str, start: int, end: int) -> int:
    """The end of a citation to remove, taking the sentence's period along where the text before it ends in one:
    "as done in Mikolov et al. (2013b)." and "et al. [12]." became "et al.." in the answers and evidence."""
    return end + 1 if text[start - 1:start] == "." and text[end:end + 1] == "." else end


def _with_space(text: str, start: int, end: int) -> tuple[int, int, str]:
    """Also remove the space before a citation so "model (Smith, 2019)." becomes "model." not "model ."."""
    if start > 0 and text[start - 1] == " ":
        start -= 1
    elif start > 0 and text[start - 1] == "\n" and end < len(text) and text[end] == " ":
        end += 1
    return start, end, ""


def apply_edits(
    text: str, pages: list[tuple[int, int]], edits: Iterable[tuple[int, int, str]]
) -> tuple[str, list[tuple[int, int]]]:
    """Apply non-overlapping ``(start, end, replacement)`` edits (overlaps: first wins) and move page ranges along."""
    chosen: list[tuple[int, int, str]] = []
    for start, end, repl in sorted(edits, key=lambda e: (e[0], -e[1])):
        if chosen and start < chosen[-1][1]:
            continue
        chosen.append((start, end, repl))
    pieces: list[str] = []
    cursor = 0
    starts: list[int] = []
    shifts: list[int] = []  # cumulative length change after each edit
    shift = 0
    for start, end, repl in chosen:
        pieces.append(text[cursor:start])
        pieces.append(repl)
        cursor = end
        shift += len(repl) - (end - start)
        starts.append(start)
        shifts.append(shift)

    def move(offset: int) -> int:
        k = bisect.bisect_right(starts, offset) - 1
        if k < 0:
            return offset
        start, end, repl = chosen[k]
        if offset < end:  # inside an edited span: clamp to the span's replacement
            before = shifts[k - 1] if k > 0 else 0
            return start + before + min(offset - start, len(repl))
        return offset + shifts[k]

    pieces.append(text[cursor:])
    return "".join(pieces), [(move(s), move(e)) for s, e in pages]


# Spaces before punctuation or a line end; not before a decimal point or comma that starts a number ("p < .001").
_SPACE_BEFORE_PUNCTUATION = re.compile(r" +(?=[.,;:](?!\d)|\n)")


def tidy_spaces(text: str) -> list[tuple[int, int, str]]:
    """Edits collapsing runs of spaces and spaces before punctuation or line ends left behind by removals."""
    edits = [(m.start(), m.end(), " ") for m in re.finditer(r" {2,}", text)]
    edits += [(m.start(), m.end(), "") for m in _SPACE_BEFORE_PUNCTUATION.finditer(text)]
    return edits


# ------------------------------------------------------------------------------------------------------------ main


def clean_pages(pages: Sequence[list[Line]], options: CleaningOptions | None = None) -> CleanResult:
    """Run the enabled steps over extracted lines and return text, page ranges and a report of what each removed.

    The lines have passed :func:`mlpsych.ingest.textnorm.normalize_lines` already (``load_documents`` does it).
    """
    options = options or CleaningOptions()
    work = [list(page) for page in pages]
    report: dict[str, Any] = {"steps": options.enabled()}
    if options.unicode:
        changed = 0
        for page in work:
            for k, line in enumerate(page):
                new = normalize_unicode(line.text)
                if new != line.text:
                    changed += 1
                    page[k] = replace(line, text=new)
        report["unicode"] = {"lines_changed": changed}
    if options.margins:
        work, report["margins"] = remove_margins(work, body_font_size(work))
    if options.headers:
        work, report["headers"] = remove_running_lines(work)
    if options.footnotes:
        work, report["footnotes"] = remove_footnotes(work)
    if options.captions:
        work, report["captions"] = remove_captions(work, body_font_size(work))
    if options.references:
        work, report["references"] = cut_references(work)
    text, ranges, hyphen_report = assemble(work, options.hyphenation)
    if options.hyphenation:
        report["hyphenation"] = hyphen_report
    if options.citations:
        edits, stats = find_citations(text)
        edits, stats["kept_for_statistics"] = without_overlaps(edits, protected_spans(text))
        text, ranges = apply_edits(text, ranges, edits)
        tidy, _ = without_overlaps(tidy_spaces(text), protected_spans(text))
        text, ranges = apply_edits(text, ranges, tidy)
        report["citations"] = stats
    return CleanResult(text=text, pages=ranges, report=report)
