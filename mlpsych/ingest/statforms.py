"""Reported statistics as printed ("t(34) = 2.10", "p < .001", "β = −.21", "95% CI [.12, .56]"), found in text.

Why: these are what social-science coders extract and quote, so cleaning must not touch a character of them. The
cleaner drops any character-level edit (citations, space tidying) that overlaps one of these spans, and the tests
and ``benchmarks/pdf_fidelity.py`` check that every form of the raw text is still in the cleaned text as printed.

A form is an operator (=, <, >, ≤, ≥, ≈, ≠, ±, or "of" as in "AUC of .71") followed by a signed decimal, with
the label right before it when there is one ("t(34)", "F(1, 98)", "χ²(2)", "η²p", "β", "OR"), or a bracketed
interval of two decimals (of any two numbers after "CI"). Whitespace inside a form (a line break from the
layout) counts as one space.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

_SIGN = "[−–‒+-]"  # minus sign, en dash, figure dash, plus, hyphen-minus: as the journal set it
_DECIMAL = rf"{_SIGN}?\s?(?:\d+\.\d+|\.\d+)(?![\d.]\d)"
_OPERATOR = r"(?:[=<>≤≥≈≠±]|\bof\b)"
# A label: a token with no brackets or operators (letters, digits, super/subscripts, primes), then at most one
# parenthesized group for degrees of freedom ("F(1, 98)"); directly before the operator or one space away.
_LABEL = r"[^\s()\[\]{}=<>≤≥≈≠±,;:]{1,16}(?:\([^()\n]{1,24}\))?"
_INTEGER = rf"{_SIGN}?\s?\d+"
_FORM = re.compile(
    rf"(?:(?<![^\s(\[;,])(?P<label>{_LABEL})\s?)?(?P<operator>{_OPERATOR})\s*(?P<value>{_DECIMAL})"
    rf"|(?P<interval>\[\s*{_DECIMAL}\s*[,;]\s*{_DECIMAL}\s*\]"  # decimals: never a numbered citation
    rf"|(?<=\bCI\s)\[\s*(?:{_DECIMAL}|{_INTEGER})\s*[,;]\s*(?:{_DECIMAL}|{_INTEGER})\s*\])"  # "95% CI [2, 5]"
)


@dataclass(frozen=True)
class StatForm:
    """One reported statistic: where it is in the text and how it reads (whitespace runs as one space)."""

    start: int
    end: int
    text: str


def find_statistics(text: str) -> list[StatForm]:
    """Every statistic form in ``text``, in order."""
    return [StatForm(m.start(), m.end(), _spaced(m.group())) for m in _FORM.finditer(text)]


def _spaced(text: str) -> str:
    return " ".join(text.split())


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges no cleaning edit may overlap: the statistic forms of ``text``."""
    return [(form.start, form.end) for form in find_statistics(text)]


def without_overlaps(
    edits: list[tuple[int, int, str]], spans: list[tuple[int, int]]
) -> tuple[list[tuple[int, int, str]], int]:
    """The edits that leave every span untouched, and how many were dropped for touching one.

    An edit touches a span when it removes or replaces a character inside it, or inserts text strictly inside it.
    """
    starts = [start for start, _ in spans]
    kept: list[tuple[int, int, str]] = []
    for edit in edits:
        start, end, _ = edit
        k = bisect.bisect_left(starts, end) - 1  # the last span starting before the edit ends (spans are sorted)
        if k >= 0 and spans[k][1] > start:
            continue
        kept.append(edit)
    return kept, len(edits) - len(kept)


@dataclass
class StatCheck:
    """Which distinct statistic forms of a raw text the cleaned text still holds as printed."""

    expected: list[str]  # forms still in the cleaned text in some shape (spacing, signs, scripts aside)
    missing: list[str]  # of those, the forms not found as printed (squeezed, re-signed, NFKC-flattened)
    removed: int  # forms gone altogether, with whole lines (captions, tables, references): not judged here

    @property
    def kept(self) -> int:
        return len(self.expected) - len(self.missing)


def _loose(text: str) -> str:
    """A form compared loosely: no whitespace, NFKC (² -> 2), every dash or minus as '-'."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", re.sub(_SIGN, "-", text)))


def check_statistics(raw: str, cleaned: str) -> StatCheck:
    """Compare the statistic forms of ``raw`` (extracted, uncleaned) with ``cleaned``.

    A form that survives in any shape (the loose comparison: "p <.001" for "p < .001", "χ2" for "χ²") must
    survive as printed; a form gone altogether went with a removed line (a table cell, a caption) and is only counted.
    """
    flat, loose = _spaced(cleaned), _loose(cleaned)
    expected: list[str] = []
    missing: list[str] = []
    removed = 0
    for text in dict.fromkeys(f.text for f in find_statistics(raw)):
        if _loose(text) not in loose:
            removed += 1
            continue
        expected.append(text)
        if text not in flat:
            missing.append(text)
    return StatCheck(expected, missing, removed)
