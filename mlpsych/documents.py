"""The document every stage reads: cleaned text plus a map from character offsets back to pages."""

from __future__ import annotations

import bisect
import functools
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_SPACE = re.compile(r"\s+")
# Scholarly abbreviations whose period sits inside a sentence ("Cameron et al. (2011) define", "as shown in Fig. 1",
# "(p. 259)", "(e.g. Mottus ...)"): the evidence a coder reads does not end after them. A fixed list, not learnt from
# any papers. Left out on purpose: "etc." and company suffixes ("IBM Corp.", "SPSS Inc."), which end sentences as often
# as not, and single capital initials, which in papers more often end one ("package for R.", "predict Y given X.").
_ABBREVIATION = re.compile(
    r"(?<![A-Za-z.])(?:al|e\.g|i\.e|cf|vs|viz|Figs?|figs?|Eqs?|Eqn|pp?|Nos?|Vol|Refs?|Tab|Secs?|Sect|approx|ca|resp"
    r"|Dr|Mrs?|Ms|Prof)\.\Z")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text`` (without the spaces between sentences): the units retrieval
    ranks and ``adapt`` cuts passages from.

    These still end after an abbreviation and run on past a heading's line, unlike the evidence: not ending after
    an abbreviation was measured for these two uses (benchmarks/README.md, adapt) and fell past the rule fixed
    before it on one question, so they stay as the figures that rest on them were measured.
    """
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if b > a]


# A line break before a capital or a digit, and the words a line that goes on in the next does not end with: a
# heading ("Statement of Relevance", "2 Related work") or a table's cell ends its line without a period, and the
# evidence after it does not open with it. Fixed from what a heading is, not learnt from any papers.
_LINE_BREAK = re.compile(r"\n(?=[A-Z0-9(\"'])")
_HEADING_WORDS = 10
_GOES_ON = frozenset("a an the and or but nor of in on at to for from by with as than that into onto over under "
                     "between via".split())


def _after_heading(text: str, newline: int) -> bool:
    """Whether the line that ends at ``newline`` is a heading or a cell: a few words, no final punctuation, and not
    a line that goes on ("... ASSOCIATION FOR" before "PSYCHOLOGICAL SCIENCE")."""
    line = text[text.rfind("\n", 0, newline) + 1 : newline].split()
    return (0 < len(line) <= _HEADING_WORDS and line[-1][-1] not in ".!?:;,-–" and line[-1].lower() not in _GOES_ON)


@functools.lru_cache(maxsize=64)
def _sentence_bounds(text: str) -> tuple[int, ...]:
    """Where the evidence sentences of ``text`` start (not after a scholarly abbreviation; after a heading's line),
    with 0 and its end: found once per text, not once per answer (every answer's evidence asks; scanning the paper
    each time was a fifth of a GPU run's time)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)
            if not _ABBREVIATION.search(text, max(0, m.start() - 12), m.start())]
    headings = [m.end() for m in _LINE_BREAK.finditer(text) if _after_heading(text, m.start())]
    return (0, *sorted({*ends, *headings}), len(text))


@dataclass
class Document:
    """A paper as plain text.

    ``pages`` holds one ``(start, end)`` character range of ``text`` per page, in page order (page 1 first);
    it is empty for a text without pages (Word, HTML, a ``.txt`` without form feeds, ``text.json``), whose
    answers then get no page number rather than a made-up page 1.
    ``status`` is ``"ok"`` or a short reason the paper could not be read; such documents carry no text and
    are reported in the output instead of being dropped.
    """

    id: str
    text: str
    pages: list[tuple[int, int]] = field(default_factory=list)
    source_path: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"

    @property
    def sha256(self) -> str:
        """Hash of the text (a cache key). Never raises: ingest normalizes text (``mlpsych.ingest.textnorm``), but a
        Document built by other code may hold a lone surrogate; ``surrogatepass`` hashes it and gives plain UTF-8
        for every other text, so existing cache keys stay the same."""
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def notes(self) -> list[str]:
        """What ingest noted about a paper it could read (pages without text, a very long file, text decoded as
        Windows-1252): answers may be missing from what it could not read, so the papers sheet and the run's
        summary show them."""
        notes = self.meta.get("warnings") or []
        return [notes] if isinstance(notes, str) else [str(note) for note in notes]

    @property
    def readable(self) -> bool:
        """Read without a problem and with text to answer from (the papers a run's plan counts)."""
        return self.ok and bool(self.text.strip())

    def page_at(self, offset: int) -> int | None:
        """1-based page number of a character offset, or None when the text has no page map."""
        if not self.pages:
            return None
        starts = [start for start, _ in self.pages]
        index = bisect.bisect_right(starts, offset) - 1
        return max(index, 0) + 1

    def sentence_around(self, start: int, end: int, max_chars: int = 600) -> str:
        """The sentence(s) containing ``text[start:end]``: the evidence a coder reads next to an answer.

        A sentence longer than ``max_chars`` around the answer (a table, a run-on list) is cut at whole words
        and the cut marked with "…", so the excerpt never opens or ends with a piece of a word the paper lacks.
        """
        text = self.text
        bounds = _sentence_bounds(text)
        left = bounds[bisect.bisect_right(bounds, start) - 1]
        right_index = bisect.bisect_left(bounds, end)
        right = bounds[min(right_index, len(bounds) - 1)]
        head = tail = ""
        if left < start - max_chars // 2:
            cut = start - max_chars // 2
            gap = _SPACE.search(text, cut - 1, start)  # a cut at a word's start keeps that word
            left, head = (gap.end() if gap else cut), "… "
        if right > end + max_chars // 2:
            cut = end + max_chars // 2
            right = max((m.start() for m in _SPACE.finditer(text, end, cut + 1)), default=cut)
            tail = " …"
        return head + " ".join(text[left:right].split()) + tail

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "pages": [list(p) for p in self.pages],
            "source_path": self.source_path,
            "meta": self.meta,
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Document":
        return cls(
            id=str(data["id"]),
            text=data.get("text", ""),
            pages=[tuple(p) for p in data.get("pages", [])],
            source_path=data.get("source_path"),
            meta=dict(data.get("meta", {})),
            status=data.get("status", "ok"),
        )
