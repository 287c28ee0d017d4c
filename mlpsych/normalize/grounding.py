"""Is an item the LLM returned actually in the paper? Where?

Users code studies from this output, so an LLM answer that cannot be pointed to in the paper is kept apart
(``ungrounded``) instead of being mixed in. An item counts as grounded when it is found, at word boundaries:

* ``verbatim`` / ``case-insensitive``;
* ``variant``: the same words with hyphen / space / no separator between them, or singular / plural
  ("support vector machine" in "support-vector machines"); or the item with other quotes, hyphens or minus signs
  ("β = -0.23" for the paper's "β = −0.23", "Ward's method" for "Ward’s method"), or without a letter's accent
  ("Naive Bayes" for "Naïve Bayes");
* ``abbreviation``: the item is an abbreviation whose long form the paper defines
  ("support vector machines (SVM)"; "XGB" for "extreme gradient boosting (XGB)");
* ``long-form``: the item is a long form whose abbreviation is in the paper ("natural language processing"
  when the paper only writes "NLP" (3+ initials), or a pair defined as "long form (ABBR)");
* an item with a parenthetical ("Support Vector Machine (SVM)", "R (version 4.1)") grounds as its name outside
  the parentheses, else the one inside.

Short all-caps items (acronyms, "R") are only matched case-sensitively, so "R" does not ground on "r = .32". A
number is found only whole: "0.23" does not ground on the paper's "−0.23", nor "scikit-learn 0.24" on "0.24.2".
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache

_SEPARATORS = r"[\s\-\u2010\u2011\u2012\u2013/_]*"
# Characters that print alike: double quotes, single quotes and apostrophes, hyphens, dashes and the minus sign. An
# LLM writes "-0.23" for the paper's "β = −0.23" and "'" for its "’", a coder's spreadsheet turns typed quotes into
# typographic ones (LibreOffice's autocorrect), ingest turns the paper's into ASCII ones.
ALIKE = ('"\u201c\u201d\u201e\u2033', "'\u2018\u2019\u201a\u2032\u02bc", "-\u2010\u2011\u2012\u2013\u2212")
_ALIKE_CLASS = {char: "[" + re.escape(group) + "]" for group in ALIKE for char in group}
# Symbols that are part of a name: "C++" and "C#" are not the letter "C" of "Appendix C" or "37 °C".
_NAME_SYMBOLS = re.compile(r"[+#]")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# "(SVM)", "(SVMs)", "(k-NN)", "(XGB)" and "[LDA]" after a candidate long form.
_DEFINED_ABBR = re.compile(r"[(\[]\s*([A-Za-z][A-Za-z0-9\-]{0,9}?[A-Z][A-Za-z0-9\-]*?)(s?)\s*[)\];,]")
# Words ignored when spelling an acronym from a long form ("analysis of variance" -> "AV" is not required).
_MINOR_WORDS = {"of", "and", "the", "for", "from", "in", "on", "with", "to", "a", "an", "by", "at", "or"}


@dataclass(frozen=True)
class Grounding:
    """Whether and how an item was found; ``start``/``end`` are character offsets into the text searched."""

    grounded: bool
    how: str  # verbatim, case-insensitive, variant, abbreviation, long-form or none
    start: int | None = None
    end: int | None = None


NOT_GROUNDED = Grounding(False, "none", None, None)


def ground(item: str, text: str) -> Grounding:
    """Find ``item`` in ``text`` (see the module docstring for the rules, tried in that order)."""
    item = " ".join((item or "").split())
    if not item or not text or not re.search(r"[^\W_]", item):
        return NOT_GROUNDED
    strict = _case_sensitive_only(item)
    found = _matched(item, text, strict)
    if found is None and not (item.isascii() and text.isascii()):  # "Naive Bayes" for the paper's "Naïve Bayes"
        plain_item, plain_text = fold_accents(item), fold_accents(text)
        if (plain_item, plain_text) != (item, text):
            found = _matched(plain_item, plain_text, strict)
            found = found and Grounding(True, "variant", found.start, found.end)
    found = found or _abbreviation(item, text) or _long_form(item, text)
    if found:
        return found
    return _parenthetical(item, text)


def _matched(item: str, text: str, strict: bool) -> Grounding | None:
    """The first of ``_patterns`` found in the text, as a grounding; None when none is."""
    lowered = _lowered(text)
    for how, pattern, fold in _patterns(item, strict):
        if not fold:
            span = _search(pattern, text)
        elif lowered is not None:
            span = _search(pattern, lowered)
        else:
            span = _search(pattern, text, re.IGNORECASE)
        if span:
            return Grounding(True, how, *span)
    return None


@lru_cache(maxsize=16)
def fold_accents(text: str) -> str:
    """The text with each accented letter as its base letter ("Naïve" -> "Naive", "Müller" -> "Muller"), one
    character for one, so offsets into it are offsets into the text."""
    return text if text.isascii() else "".join(_base_letter(c) for c in text)


@cache
def _base_letter(char: str) -> str:
    decomposed = unicodedata.normalize("NFD", char)
    return decomposed[0] if len(decomposed) > 1 and not unicodedata.combining(decomposed[0]) else char


_PARENTHETICAL = re.compile(r"^(?P<main>[^()]+?)\s*\((?P<inner>[^()]+)\)$")


def _parenthetical(item: str, text: str) -> Grounding:
    """ "Support Vector Machine (SVM)" or "R (version 4.1)": the name outside the parentheses, else inside."""
    match = _PARENTHETICAL.match(item)
    if not match:
        return NOT_GROUNDED
    for part in (match.group("main"), match.group("inner")):
        found = ground(part, text)
        if found.grounded:
            return found
    return NOT_GROUNDED


def _case_sensitive_only(item: str) -> bool:
    """Acronyms and one/two-letter names: case carries the meaning ("R" vs "r", "LDA" vs "lda")."""
    letters = [c for c in item if c.isalpha()]
    if len(letters) <= 2:
        return True
    return is_abbreviation(item)


def is_abbreviation(item: str) -> bool:
    """One token of mostly capitals ("SVM", "k-NN", "XGB", "LSTMs"), not an ordinary capitalised word."""
    if " " in item or len(item) > 12:
        return False
    core = item[:-1] if item.endswith("s") and sum(c.isupper() for c in item) >= 2 else item
    uppers = sum(c.isupper() for c in core)
    letters = sum(c.isalpha() for c in core)
    return letters >= 2 and uppers >= 2 and uppers * 2 >= letters


def _search(core: str, text: str, flags: int = 0) -> tuple[int, int] | None:
    """First match of ``core`` standing alone (no letter or digit touching either end).

    Boundaries are checked on each hit rather than written as look-arounds, which would keep the regex
    engine from skipping ahead to candidate positions (5x slower on a 60k-character paper).
    """
    for match in re.finditer(core, text, flags):
        start, end = match.span()
        if end > start and not _is_alnum_at(text, start - 1) and not _is_alnum_at(text, end) \
                and not _number_goes_on(text, start, end):
            return start, end
    return None


_SIGNS = "-\u2212+\u00b1"  # hyphen-minus, minus sign, plus, plus-minus
_NUMBER_MARKS = ".,"  # decimal point, thousands separator


def _number_goes_on(text: str, start: int, end: int) -> bool:
    """A match that starts or ends with a digit is part of a longer number: its sign ("0.23" in "β = −0.23", though
    not a range's "2019" in "2015-2019"), its leading decimal point ("87" in ".87"), or more digits after a point or
    comma ("0.24" in "0.24.2", "1" in "1,234"). Else an LLM item that dropped a sign or cut a version was grounded,
    and shown as the paper's value."""
    if text[start].isdigit() and start > 0:
        before = text[start - 1]
        if before in _NUMBER_MARKS or (before in _SIGNS and not _is_alnum_at(text, start - 2)):
            return True
    return (text[end - 1].isdigit() and end < len(text) and text[end] in _NUMBER_MARKS
            and end + 1 < len(text) and text[end + 1].isdigit())


@lru_cache(maxsize=16)
def _lowered(text: str) -> str | None:
    """The text in lowercase when that keeps every offset (searching it beats re.IGNORECASE 5-30x)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else None


def _is_alnum_at(text: str, index: int) -> bool:
    return 0 <= index < len(text) and text[index].isalnum()


def alike_pattern(text: str) -> str:
    """``text`` as a regex that also matches it written with other quotes, hyphens or minus signs (``ALIKE``)."""
    return "".join(_ALIKE_CLASS.get(c) or re.escape(c) for c in text)


def _patterns(item: str, strict: bool) -> list[tuple[str, str, bool]]:
    """(how, regex, case-insensitive?) in the order tried; case-insensitive regexes are written in lowercase."""
    patterns = [("verbatim", re.escape(item), False)]
    if alike_pattern(item) != re.escape(item):
        patterns.append(("variant", alike_pattern(item), False))
    if not strict:
        patterns.append(("case-insensitive", alike_pattern(item.lower()), True))
    variant = _variant_pattern(item if strict else item.lower(), strict)
    if variant:
        patterns.append(("variant", variant, not strict))
    return patterns


def _variant_pattern(item: str, strict: bool) -> str | None:
    """Same words, any of hyphen / space / nothing between them, and an optional plural on the last word. None for
    a name whose symbols make it another name ("C++", "C#", "k-means++"): its words alone are "C" or "k-means"."""
    words = _WORD.findall(item)
    if not words or _NAME_SYMBOLS.search(item):
        return None
    parts = [re.escape(w) for w in words[:-1]] + [_plural_free(words[-1], strict)]
    return _SEPARATORS.join(parts)


def _plural_free(word: str, strict: bool) -> str:
    """The word in singular or plural: "machine(s)", "ontology/ontologies", "analysis/analyses"."""
    if strict:
        stem = word[:-1] if word.endswith("s") and len(word) > 2 else word
        return re.escape(stem) + "s?"
    lower = word.lower()
    if lower.endswith("ies") and len(word) > 4:
        return re.escape(word[:-3]) + "(?:y|ies)"
    if lower.endswith("y") and len(word) > 2 and lower[-2] not in "aeiou":
        return re.escape(word[:-1]) + "(?:y|ies)"
    if lower.endswith("sis") and len(word) > 4:
        return re.escape(word[:-2]) + "(?:is|es)"
    if lower.endswith("ses") and len(word) > 4:
        return re.escape(word[:-2]) + "(?:is|es)"
    if lower.endswith("es") and lower[-3:-2] in ("s", "x", "z", "h") and len(word) > 4:
        return re.escape(word[:-2]) + "(?:es)?"
    if lower.endswith("s") and not lower.endswith("ss") and len(word) > 3:
        return re.escape(word[:-1]) + "s?"
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return re.escape(word) + "(?:es)?"
    return re.escape(word) + "s?"


# -- abbreviations ---------------------------------------------------------------------------------------


def _letters(abbr: str) -> str:
    """The letters an abbreviation spells, lowercased ("k-NN" -> "knn", "SVMs" -> "svm")."""
    core = abbr[:-1] if abbr.endswith("s") and sum(c.isupper() for c in abbr) >= 2 else abbr
    return "".join(c for c in core if c.isalnum()).lower()


def _abbreviation(item: str, text: str) -> Grounding | None:
    """The item is an abbreviation whose long form the paper defines ("support vector machines (SVM)").

    Guessing a long form from any run of words with the right initials was tried on MLPsych and rejected:
    it grounded "LSA" on "leadership styles almost" and "SAS" on "self-awareness seem".
    """
    pair = next((pair for pair, part in _definitions_named(item, text) if part == "short"), None)
    return None if pair is None else Grounding(True, "abbreviation", pair.long_start, pair.long_end)


def _long_form(item: str, text: str) -> Grounding | None:
    """The item is a long form: a pair defined in the paper, or its initials written as an abbreviation."""
    words = _WORD.findall(item)
    if len(words) < 2:
        return None
    key = _long_key(item)
    for pair in defined_pairs(text):
        if _long_key(pair.long) == key:
            return Grounding(True, "long-form", pair.short_start, pair.short_end)
    initials = "".join(w[0] for w in words if w.lower() not in _MINOR_WORDS)
    if len(initials) < 3:
        return None  # two-letter guesses ("RF", "ML") match too much unless the paper defines them
    upper = initials.upper()
    pattern = f"[{upper[0]}{upper[0].lower()}]" + "".join("-?" + re.escape(c) for c in upper[1:]) + "s?"
    span = _search(pattern, text)
    return Grounding(True, "long-form", *span) if span else None


def _long_key(phrase: str) -> str:
    """Comparison key of a long form: lowercase words without separators or a final plural s."""
    words = [w.lower() for w in _WORD.findall(phrase)]
    if words and words[-1].endswith("s") and len(words[-1]) > 3:
        words[-1] = words[-1][:-1]
    return " ".join(words)


def aliases(item: str, text: str) -> list[str]:
    """The item plus the other half of any "long form (ABBR)" pair the text defines for it.

    Lets a caller check an LLM item against a snippet the way the paper writes it: "LDA" against the snippet
    "latent Dirichlet allocation" when the paper defines "latent Dirichlet allocation (LDA)" elsewhere.
    """
    names = [item]
    for pair, part in _definitions_named(item, text):  # the other part; both for the definition itself
        names += {"short": [pair.long], "long": [pair.short], "whole": [pair.long, pair.short]}[part]
    return list(dict.fromkeys(names))


def definition_of(item: str, text: str) -> AbbreviationPair | None:
    """The paper's definition that ``item`` is a name of: its abbreviation, its long form or the whole
    "long form (ABBR)" (case, separators and a final plural s aside); the first one written. None when there is
    none, or when the paper gives the item two different long forms (an "LDA" defined twice is left alone)."""
    found = [pair for pair, _ in _definitions_named(item, text)]
    if len({_long_key(pair.long) for pair in found}) != 1:
        return None
    return found[0]


def _definitions_named(item: str, text: str) -> list[tuple[AbbreviationPair, str]]:
    """The text's "long form (ABBR)" definitions that ``item`` names, in the text's order, each with the part it
    names: "short" (an abbreviation spelling its letters), else "long" (its long form; case, separators and a final
    plural s aside), else "whole" (the definition as written). One rule for what an item names, for grounding,
    aliases and the frequencies' keys."""
    letters = _letters(item) if is_abbreviation(item) else None
    key = _long_key(item)
    named = []
    for pair in defined_pairs(text):
        if letters is not None and _letters(pair.short) == letters:
            named.append((pair, "short"))
        elif _long_key(pair.long) == key:
            named.append((pair, "long"))
        elif _long_key(f"{pair.long} {pair.short}") == key:
            named.append((pair, "whole"))
    return named


@dataclass(frozen=True)
class AbbreviationPair:
    """A "long form (SHORT)" definition found in a text, with the offsets of both parts."""

    short: str
    long: str
    short_start: int
    short_end: int
    long_start: int
    long_end: int


@lru_cache(maxsize=16)
def defined_pairs(text: str) -> tuple[AbbreviationPair, ...]:
    """Every "long form (ABBR)" definition in the text, long form checked against the abbreviation's letters.

    The long form is the shortest run of words before the parenthesis whose word initials (or, failing that,
    characters in order, as in "extreme gradient boosting (XGB)") spell the abbreviation.
    """
    pairs = []
    for match in _DEFINED_ABBR.finditer(text):
        short = match.group(1) + match.group(2)
        if not is_abbreviation(short) and not is_abbreviation(match.group(1)):
            continue
        letters = _letters(short)
        if len(letters) < 2:
            continue
        span = _long_form_before(text, match.start(), letters)
        if span:
            pairs.append(AbbreviationPair(short, text[span[0]:span[1]], match.start(1), match.end(2),
                                          span[0], span[1]))
    return tuple(pairs)


def _long_form_before(text: str, paren: int, letters: str) -> tuple[int, int] | None:
    window_start = max(0, paren - 200)
    words = list(_WORD.finditer(text, window_start, paren))
    if not words:
        return None
    end = words[-1].end()
    limit = min(len(words), len(letters) + 5)
    for count in range(1, limit + 1):
        chosen = words[-count:]
        if _spells_by_initials(letters, [w.group() for w in chosen]):
            return chosen[0].start(), end
    for count in range(2, min(len(words), len(letters)) + 1):
        chosen = words[-count:]
        if _spells_in_order(letters, [w.group() for w in chosen]):
            return chosen[0].start(), end
    return None


def _spells_by_initials(letters: str, words: list[str]) -> bool:
    """Initials of the words (minor words optional) are exactly the abbreviation's letters."""
    major = [w for w in words if w.lower() not in _MINOR_WORDS]
    if "".join(w[0] for w in major).lower() == letters:
        return True
    return "".join(w[0] for w in words).lower() == letters


def _spells_in_order(letters: str, words: list[str]) -> bool:
    """Schwartz-Hearst style: the letters appear in order through the words, every major word giving one or
    more ("extreme gradient boosting" -> XGB, "analysis of variance" -> ANOVA)."""
    remaining = letters
    for word in words:
        lower = word.lower()
        position = 0
        used = 0
        while remaining and (found := lower.find(remaining[0], position)) >= 0:
            position = found + 1
            remaining = remaining[1:]
            used += 1
        if not used and lower not in _MINOR_WORDS:
            return False
    return not remaining
