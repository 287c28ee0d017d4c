"""Margin and overlay text taken out of the body: what a publisher or a repository stamps on every page.

Why: "Downloaded from https://… on 24 July 2025", the APA notice printed up the margin of every page, and running
stamps such as "DeBruine et al. preprint v.2" are not part of the paper, yet extraction puts them into its text -
often in the middle of a sentence ("per-This article is intended solely … son fails"), from where they reach an
answer's evidence sentence. Four rules, each counted in the cleaning report:

* geometry (pdfium): a line set at an angle on a page of upright text, lying wholly beside the text block
  (the left/right extent of the document's body-size text), or set too small to read is margin text;
* notices: download, copyright and personal-use notices and SAGE's hidden manuscript stamp, wherever they
  are, also across line breaks;
* repeated stamps: a line that recurs on most pages (digits aside) is a stamp, and so is the same text spliced into
  a body line, where extraction order put it mid-sentence.
* line numbers: a manuscript or preprint that numbers its lines in the margin (every line, or every 5th or 10th)
  gets those numbers glued to the start or end of its lines ("can be 18 diminished"); where most pages have such a
  rising run of numbers, they are taken out.

Where a cut leaves both halves of a sentence, the right half is marked as its continuation, so assembly rejoins
them (a hyphenated word split by a stamp is joined as any line-end hyphenation).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from mlpsych.ingest.base import Line


def _phrase(words: str) -> str:
    """A fixed wording as it reads with all whitespace taken out (see :func:`find_notices`)."""
    return re.escape("".join(words.split()))


# Notices are matched on the text with its whitespace taken out: extraction may break a notice at any point, and
# Tika breaks rotated margin text into pieces of a few letters ("Th is / d / oc / um en t"), so no word boundary
# can be trusted. The patterns below are written for that text: "24July2025", "Downloadedfromhttps://...".
_DATE = (
    r"(?:[A-Z][a-z]{2},?)?"  # weekday
    r"(?:\d{1,2}[A-Z][a-z]{2,8}\.?,?\d{4}|[A-Z][a-z]{2,8}\.?\d{1,2},\d{4}"  # 24July2025, July24,2025
    r"|\[?\d{1,2}/\d{1,2}/\d{4}\]?|\d{4}-\d{2}-\d{2})"
    r"(?:,?\d{1,2}:\d{2}(?::\d{2})?(?:[AP]M)?(?:UTC|GMT)?)?"
)
_DOWNLOADED = (
    rf"(?:Thiscontent)?[Dd]ownloadedfrom\S{{4,160}}?on{_DATE}\.?"
    rf"(?:{_phrase('All use subject to')}\S{{4,80}}?terms)?"  # JSTOR
    rf"(?:{_phrase('See the Terms and Conditions')}\S{{4,80}}?{_phrase('on Wiley Online Library for rules of use;')}"
    rf"{_phrase('OA articles are governed by the applicable Creative Commons License')})?"  # Wiley
)
NOTICE = re.compile(
    "|".join(
        [
            _DOWNLOADED,
            rf"{_phrase('This document is copyrighted by')}(?:the)?[A-Z][^.]{{3,120}}?\.",  # APA
            _phrase("This article is intended solely for the personal use of the individual user and is not to be "
                    "disseminated broadly."),
            _phrase("Content may be shared at no cost, but any requests to reuse this content in part or whole must "
                    "go through the") + r"[A-Z][^.]{3,80}?\.",
            _phrase("Content courtesy of Springer Nature, terms of use apply. Rights reserved."),
            # SAGE's hidden manuscript stamp (1-point type in a page corner): "795679PSSXXX10.1177/0956797618795679
            # Blini et al.Mind the Depth research-article2018"
            r"\d{6}[A-Z]{2,6}XXX10\.\d{4,9}/\d{6,}.{0,250}?research-article\d{4}",
        ]
    )
)


def find_notices(text: str) -> list[tuple[int, int]]:
    """Character spans of download, copyright and personal-use notices in ``text``, however it is broken up."""
    where = [k for k, char in enumerate(text) if not char.isspace()]
    flat = "".join(text[k] for k in where)
    return [(where[m.start()], where[m.end() - 1] + 1) for m in NOTICE.finditer(flat) if m.end() > m.start()]


_SENTENCE_END = re.compile(r"[.!?:][\"'”’)\]]*$")
_LETTER_WORDS = re.compile(r"[^\W\d_]{2,}")
_NUMBER = r"\d+(?:\s*(?:/|of)\s*\d+)?"  # any number where a stamp has one (a page number "2/17" included)
_NOT_PROSE = re.compile(r"\d|https?:|www\.|[/|@©®]")
_HYPHENATED_END = re.compile(r"[^\W\d_]-$")
_TINY = 0.4  # text below this share of the body font size cannot be read: an overlay, not content
_EDGE = 0.01  # a line must lie this far (share of the page width) beside the text block to count as margin text
_STAMP_SHARE = 0.5  # a stamp recurs on at least this share of the pages (and on 3 pages or more)
_STAMP_ZONE = 5  # lines at the top and at the foot of a page (by position, else by order) where stamps are learned


@dataclass
class TextBlock:
    """Left and right edges of the document's body text (shares of the page width)."""

    left: float
    right: float

    def beside(self, line: Line) -> bool:
        if line.x0 is None or line.x1 is None:
            return False
        return line.x1 < self.left - _EDGE or line.x0 > self.right + _EDGE


def text_block(pages: list[list[Line]], body_size: float | None) -> TextBlock | None:
    """Where body-size upright text lies: the 2nd and 98th percentiles (by characters) of its left and right ends,
    so a wide table or a stray line does not widen it. None without geometry."""
    lines = [
        ln for page in pages for ln in page
        if ln.x0 is not None and ln.x1 is not None and not ln.rotated
        and (body_size is None or (ln.size is not None and abs(ln.size - body_size) < 0.6))
    ]
    if len(lines) < 20:
        return None
    lefts = sorted((ln.x0, len(ln.text)) for ln in lines)  # type: ignore[misc]
    rights = sorted((ln.x1, len(ln.text)) for ln in lines)  # type: ignore[misc]
    return TextBlock(_quantile(lefts, 0.02), _quantile(rights, 0.98))


def _quantile(weighted: list[tuple[float, int]], q: float) -> float:
    total = sum(w for _, w in weighted)
    running = 0
    for value, weight in weighted:
        running += weight
        if running >= q * total:
            return value
    return weighted[-1][0]


_EDGE_NUMBER = re.compile(r"^\W*\d+(?:\s*(?:/|of)\s*\d+)?|(?:\d+\s*(?:/|of)\s*)?\d+\W*$", re.IGNORECASE)


def line_key(text: str) -> str:
    """Comparable form of a line repeated across pages: case, spacing, punctuation and a page number at either
    end ignored (a running head, a stamp "… DOI 10.7717/peerj-cs.118 2/17")."""
    return re.sub(r"[\W_]+", "", _EDGE_NUMBER.sub("#", text.strip()).lower().replace("#", "0"))


def zone_indices(page: list[Line], size: int) -> list[int]:
    """Indices of the first and last ``size`` lines of a page, by position when known, else by order."""
    order = list(range(len(page)))
    if page and all(line.y is not None for line in page):
        order.sort(key=lambda i: page[i].y)  # type: ignore[arg-type,return-value]
    return sorted(set(order[:size] + order[-size:]))


def find_stamps(pages: list[list[Line]]) -> dict[str, str]:
    """Lines of two words or more printed at the top or foot of most pages (at least half, and 3 pages or more)
    beside other text: their key and one of them as printed. Learned where stamps stand alone, they are then
    removed wherever they are (extraction order may put them mid-page or splice them into a sentence). Only
    pages longer than the two zones teach stamps: on a short page every line is at the top or the foot."""
    if len(pages) < 3:
        return {}
    counts: Counter[str] = Counter()
    printed: dict[str, str] = {}
    for page in pages:
        if len({line_key(line.text) for line in page}) <= 2 * _STAMP_ZONE:
            continue  # a short page is all zone: nothing tells a stamp from its content
        zone = [page[i] for i in zone_indices(page, _STAMP_ZONE)]
        keys = {line_key(line.text): line.text for line in zone if len(_LETTER_WORDS.findall(line.text)) >= 2}
        counts.update(keys.keys())
        for key, text in keys.items():
            printed.setdefault(key, text)
    limit = max(3, _STAMP_SHARE * len(pages))
    return {key: printed[key] for key, n in counts.items() if n >= limit and key}


def _stamp_pattern(stamps: dict[str, str]) -> re.Pattern[str] | None:
    """Stamps as they may appear spliced into a line (any numbers, any spacing): those of three words or more
    with a digit, a URL or a symbol in them ("DeBruine et al. preprint v.2"), not a running title in plain words,
    which the paper's own title or a heading may begin with."""
    long = sorted((text.strip() for text in stamps.values()
                   if len(_LETTER_WORDS.findall(text)) >= 3 and _NOT_PROSE.search(text)), key=len, reverse=True)
    if not long:
        return None
    parts = ["".join(_NUMBER if piece.isdigit() else r"\s+" if piece.isspace() else re.escape(piece)
                     for piece in re.split(r"(\d+|\s+)", text) if piece) for text in long]
    return re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)")


@dataclass
class _Cuts:
    """What the margin step removed, for the cleaning report."""

    rotated: int = 0
    beside_block: int = 0
    tiny: int = 0
    notices: int = 0
    stamps: int = 0
    spliced: int = 0
    line_numbers: int = 0
    rejoined: int = 0
    examples: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        text = " ".join(text.split())[:80]
        if len(self.examples) < 5 and text not in self.examples:
            self.examples.append(text)


def remove_margins(pages: list[list[Line]], body_size: float | None) -> tuple[list[list[Line]], dict[str, Any]]:
    """Drop margin and overlay text (see the module docstring); the report counts each kind of removal.

    Order: line numbers, geometry, then notices, then stamps, which are learned on pages already without the notices
    (Tika puts a page's overlay text at its end, where it would hide a stamp from the zone stamps are learned in).
    """
    cuts = _Cuts()
    numbered = strip_line_numbers(pages, cuts)
    block = text_block([lines for lines, _ in numbered], body_size)
    marked = [_cut_lines(lines, lambda line, up=_upright(lines): _beside(line, up, block, body_size, cuts), flags)
              for lines, flags in numbered]
    marked = [_cut_matches(lines, flags, find_notices, cuts, "notices") for lines, flags in marked]
    stamps = find_stamps([lines for lines, _ in marked])
    spliced = _stamp_pattern(stamps)
    if stamps:
        marked = [_cut_lines(lines, lambda line: _is_stamp(line, stamps, cuts), flags) for lines, flags in marked]
    if spliced is not None:
        finder = lambda text: [m.span() for m in spliced.finditer(text)]  # noqa: E731
        marked = [_cut_matches(lines, flags, finder, cuts, "spliced") for lines, flags in marked]
    out: list[list[Line]] = []
    previous: Line | None = None  # the last line kept so far, on this page or an earlier one
    for lines, flags in marked:
        for k, line in enumerate(lines):
            if flags[k] and line.para_break and previous is not None and _continues(previous.text, line.text):
                lines[k] = line = replace(line, para_break=False)
                cuts.rejoined += 1
            previous = line
        out.append(lines)
    report = asdict(cuts)
    if not report["examples"]:
        del report["examples"]
    return out, report


_NUMBER_AT = {"start": re.compile(r"^\s*(\d{1,4})(?:\s+|$)"), "end": re.compile(r"(?:^|\s+)(\d{1,4})\s*$")}
_LINE_NUMBER_STEPS = (1, 5, 10)  # manuscripts number every line, or every 5th or 10th
_LINE_NUMBER_RUN = 4  # numbers rising in step, at least, for a page to count as numbered (45 lines numbered by 10s)
_LINE_NUMBER_PAGES = 0.5  # share of the pages of 10 lines or more that must be numbered (and 2 pages or more)
_LINE_NUMBER_REACH = 3  # a number follows one of the last this many numbers found (others passed over between)


def _chained(found: list[tuple[Any, int]], step: int) -> tuple[int, set[Any]]:
    """The longest chain of ``found`` (key, number), in order, whose numbers rise by ``step`` from one to the next
    (or by two steps: one number missing), and the keys of every chain of two or more. A number that does not fit
    (a count or a year starting a line between two numbered ones) is passed over, not a break; but a link reaches
    back ``_LINE_NUMBER_REACH`` numbers at most, so a count far down the paper ("version 24") does not carry on the
    line numbers of its first page."""
    length: list[int] = []
    before: list[int | None] = []
    for i, (_, number) in enumerate(found):
        options = [j for j in range(max(0, i - _LINE_NUMBER_REACH), i) if number - found[j][1] in (step, 2 * step)]
        previous = max(options, key=lambda j: length[j], default=None)
        length.append(1 if previous is None else length[previous] + 1)
        before.append(previous)
    chained: set[Any] = set()
    for i in range(len(found)):
        j: int | None = i if length[i] >= 2 else None
        while j is not None and found[j][0] not in chained:
            chained.add(found[j][0])
            j = before[j]
    return max(length, default=0), chained


def strip_line_numbers(pages: list[list[Line]], cuts: _Cuts) -> list[tuple[list[Line], list[bool]]]:
    """The pages without their line numbers (see the module docstring), counted in ``cuts``, and per line whether
    a number was taken from it or right before it (an extraction may start a paragraph at each number: where the
    sentence runs on, the margin step rejoins it as after any cut).

    A page is numbered where a chain of ``_LINE_NUMBER_RUN`` numbers or more rises in one step at its lines' start
    (or end); the document is, where most of its pages are (a numbered table or list is one page's chain, not the
    paper's). Then every chain of two numbers or more in that step goes, across page breaks too, so a last page's
    single number that carries on the previous page's goes with them."""
    pages = list(pages)
    long_pages = sum(len(page) >= 10 for page in pages)
    flags = [[False] * len(page) for page in pages]
    for at in ("start", "end"):
        found = [[(k, int(m.group(1))) for k, line in enumerate(page) if (m := _NUMBER_AT[at].search(line.text))]
                 for page in pages]

        numbered = {step: sum(_chained(page_found, step)[0] >= _LINE_NUMBER_RUN for page_found in found)
                    for step in _LINE_NUMBER_STEPS}  # pages numbered in each step
        step = max(numbered, key=numbered.__getitem__)
        if numbered[step] < max(2, _LINE_NUMBER_PAGES * long_pages):
            continue
        numbers = _chained([((p, k), number) for p, page_found in enumerate(found) for k, number in page_found],
                           step)[1]
        for p, page in enumerate(pages):
            kept: list[Line] = []
            kept_flags: list[bool] = []
            pending = False  # a number-only line was dropped right before
            for k, line in enumerate(page):
                cut = (p, k) in numbers
                if cut:
                    cuts.line_numbers += 1
                    line = replace(line, text=_NUMBER_AT[at].sub(" ", line.text, count=1).strip())
                    if not line.text:
                        pending = True
                        continue
                kept.append(line)
                kept_flags.append(flags[p][k] or cut or pending)
                pending = False
            pages[p], flags[p] = kept, kept_flags
    return list(zip(pages, flags))


def _beside(line: Line, upright: bool, block: TextBlock | None, body_size: float | None, cuts: _Cuts) -> bool:
    """True (and counted) for a line set at an angle on a page of mostly upright text (a margin notice, an axis
    label), for a line beside the text block, and for text too small to read (a publisher's hidden stamp in
    1-point type). A landscape page (a wide table or figure set sideways) is not margin text and keeps its
    rotated lines."""
    if body_size and line.size is not None and line.size < _TINY * body_size:
        cuts.tiny += 1
        cuts.note(line.text)
        return True
    if line.rotated and upright:
        cuts.rotated += 1
        return True
    if block is not None and block.beside(line):
        cuts.beside_block += 1
        return True
    return False


def _upright(lines: list[Line]) -> bool:
    """True when most of the text (by characters) is upright."""
    return sum(len(ln.text) for ln in lines if not ln.rotated) >= sum(len(ln.text) for ln in lines) / 2


def _is_stamp(line: Line, stamps: dict[str, str], cuts: _Cuts) -> bool:
    if line_key(line.text) not in stamps:
        return False
    cuts.stamps += 1
    cuts.note(line.text)
    return True


def _cut_lines(
    page: list[Line], drop: Callable[[Line], bool], flags: list[bool] | None = None
) -> tuple[list[Line], list[bool]]:
    """The page without the lines ``drop`` picks, and per kept line whether something was cut right before it."""
    kept: list[Line] = []
    kept_flags: list[bool] = []
    pending = False
    for k, line in enumerate(page):
        if drop(line):
            pending = True
            continue
        kept.append(line)
        kept_flags.append(pending or (flags is not None and flags[k]))
        pending = False
    return kept, kept_flags


def _continues(before: str, after: str) -> bool:
    """True when ``after`` carries on the sentence ``before`` left open (a hyphenated word, or no full stop
    before a lower-case letter)."""
    before = before.rstrip()
    return bool(_HYPHENATED_END.search(before)) or (not _SENTENCE_END.search(before) and after.lstrip()[:1].islower())


def _cut_matches(
    page: list[Line], flags: list[bool], find: Callable[[str], list[tuple[int, int]]], cuts: _Cuts, kind: str
) -> tuple[list[Line], list[bool]]:
    """Cut every span ``find`` returns for the page's lines joined by newlines (a span may cross line breaks).

    A line cut in its middle keeps both halves: joined by a space, or, when the left half ends in a hyphenated
    word ("per-"), as two lines, so assembly decides on the hyphen as at any line end. ``flags`` (one per line:
    something was cut right before it) come back for the new lines.
    """
    joined = "\n".join(line.text for line in page)
    spans = [(start, end) for start, end in find(joined) if joined[start:end].strip()]
    if not spans:
        return page, flags
    setattr(cuts, kind, getattr(cuts, kind) + len(spans))
    for start, end in spans:
        cuts.note(joined[start:end])
    out: list[Line] = []
    out_flags: list[bool] = []
    pending = False
    offset = 0
    for line, flag in zip(page, flags):
        start_of_line, end_of_line = offset, offset + len(line.text)
        offset = end_of_line + 1
        pending = pending or flag
        inside = [(max(s, start_of_line) - start_of_line, min(e, end_of_line) - start_of_line)
                  for s, e in spans if s < end_of_line and e > start_of_line]
        if not inside:
            out.append(line)
            out_flags.append(pending)
            pending = False
            continue
        bounds = [0] + [edge for span in inside for edge in span] + [len(line.text)]
        pieces = [line.text[bounds[k] : bounds[k + 1]].strip() for k in range(0, len(bounds), 2)]
        head, tail = pieces[0], " ".join(p for p in pieces[1:] if p)
        if head and tail and _HYPHENATED_END.search(head):
            out += [replace(line, text=head), replace(line, text=tail, para_break=False)]
            out_flags += [pending, True]
        elif head or tail:
            out.append(replace(line, text=f"{head} {tail}".strip()))
            out_flags.append(pending or not head)
        pending = not pieces[-1]  # the cut ran to the end of the line (or took all of it)
    return out, out_flags
