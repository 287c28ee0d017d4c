"""Turning whatever an instruction-tuned LLM returned into a clean list of short strings.

Models asked for "a Python list of strings" answer with a list literal, JSON, a bulleted list, a comma list,
chatter around any of these, or output cut off by the token limit. This module reads all of those without
ever evaluating model output as code (``ast.literal_eval`` only sees a bracket-extracted, length-bounded
substring) and never raises: garbage yields an empty list.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from collections.abc import Iterable

log = logging.getLogger(__name__)

# Longest list literal handed to a real parser; longer brackets go through the tolerant scanner only.
MAX_LITERAL_CHARS = 20_000
# An item longer than this (characters / words) is prose, not an entity name.
MAX_ITEM_CHARS = 120
MAX_ITEM_WORDS = 12
# Unstructured text (no brackets, no bullets) is only split into items this short.
MAX_LOOSE_WORDS = 6

_EMPTY_ANSWERS = {
    "", "none", "n/a", "na", "nil", "null", "nothing", "empty", "no", "[]", "{}", "none.", "n/a.",
    "none found", "not applicable", "not mentioned", "not reported", "no techniques", "no software",
    "empty list", "an empty list",
}
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb"
_FENCE = re.compile(r"^\s*```[\w+-]*\s*$", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022\u00b7\u2013+]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s+(?P<item>\S.*)$")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
# "Random forest: an ensemble of trees" / "SVM - used for ..." -> keep the name before the explanation.
_EXPLANATION = re.compile(r"\s*(?::\s|\s[-\u2013\u2014]\s).*$")
_CHATTER_STARTS = {
    "i", "i'm", "im", "we", "you", "it", "it's", "this", "that", "these", "there", "here", "sorry", "but",
    "unfortunately", "please", "note", "sure", "certainly", "ok", "okay", "hope", "let", "based", "as",
    "however", "so", "thus", "therefore", "because", "which", "if",
}
_SPECIAL_TOKEN = re.compile(r"<\|[^|<>\s]{1,40}\|>|</?s>")
_HAS_LETTER = re.compile(r"[^\W\d_]")


def parse_list(raw: str, *, max_items: int = 100) -> list[str]:
    """Items of the list in ``raw`` (deduplicated case-insensitively, in order); ``[]`` for empty or garbage."""
    try:
        items = _parse(raw if isinstance(raw, str) else "")
    except Exception:  # noqa: BLE001 - model output must never crash a run
        log.debug("unparseable model output: %.200r", raw, exc_info=True)
        items = []
    return _dedupe(items)[:max_items]


def says_none(raw: str) -> bool:
    """Whether an output that gave no item says there is none (``[]``, "None", ``["N/A"]``, ``{"countries": []}``).

    Prose ("The study was conducted in the United States.") and garbage also parse to no item, but say nothing
    about the paper: a question that may have no answer must not lose its extractive answers to them.
    """
    if not isinstance(raw, str) or parse_list(raw):
        return False
    text = _cleaned(raw)
    if _is_empty_answer(text):
        return True
    for start in (m.start() for m in re.finditer(r"\[", text)):
        values, closed = _scan_list(text, start)
        if closed is None:
            return False
        literal = _literal(text[start:closed])
        if literal is not None:
            values = list(_flatten(literal))
        if all(_is_empty_answer(v) for v in values):
            return True
    return False


def _cleaned(raw: str) -> str:
    """Special tokens, code fences and U+FFFD (bytes of a character cut by the token limit) are noise, not content."""
    return _SPECIAL_TOKEN.sub(" ", _FENCE.sub("", raw)).replace("\ufffd", " ").strip()


def _parse(raw: str) -> list[str]:
    text = _cleaned(raw)
    if _is_empty_answer(text):
        return []
    if text.startswith("(") and text.endswith(")"):
        literal = _literal(text)
        if literal is not None:
            return _clean_all(_flatten(literal), MAX_ITEM_WORDS)
    found = _from_brackets(text)
    if found is not None:
        return found
    found = _from_json_object(text)
    if found is not None:
        return found
    bullets = _from_bullets(text)
    if bullets:
        return bullets
    return _from_loose_text(text)


def _is_empty_answer(text: str) -> bool:
    return text.strip().strip(_QUOTES).strip().rstrip(".!").lower() in _EMPTY_ANSWERS


# -- list literals -------------------------------------------------------------------------------------------


def _from_brackets(text: str) -> list[str] | None:
    """Items of the first bracket list that yields any; ``[]`` if only empty lists; None if no list at all."""
    saw_list = False
    for start in (m.start() for m in re.finditer(r"\[", text)):
        if _inside_earlier_list(text, start):
            continue
        values, closed = _scan_list(text, start)
        literal = _literal(text[start:closed]) if closed is not None else None
        if literal is not None:
            values = list(_flatten(literal))
        items = _clean_all(values, MAX_ITEM_WORDS)
        if items:
            return items
        if closed is not None and _is_string_list(literal, text[start + 1:closed - 1]):
            saw_list = True
        if closed is None:  # truncated output with no complete item: nothing after it is a list either
            return []
    return [] if saw_list else None


def _is_string_list(literal: object | None, inner: str) -> bool:
    """An explicit list of strings (or ``[]``) that held no usable item means "none"; ``[1]`` is a citation."""
    if literal is None:
        return not inner.strip()
    if not isinstance(literal, (list, tuple)):
        return False
    return not any(isinstance(v, (int, float)) for v in literal)


def _inside_earlier_list(text: str, index: int) -> bool:
    """True for the inner '[' of a nested list such as ``[["SVM"]]`` (the outer one was already tried)."""
    return index > 0 and text[:index].rstrip().endswith(("[", ","))


def _literal(chunk: str) -> object | None:
    """The value of a bracketed JSON or Python literal, or None; never evaluates code."""
    if len(chunk) > MAX_LITERAL_CHARS:
        return None
    for loader in (json.loads, ast.literal_eval):
        try:
            value = loader(chunk)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, (list, tuple)):
            return value
    return None


def _flatten(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple, set)):
        for element in value:
            yield from _flatten(element)
    elif isinstance(value, dict):
        for element in value.values():
            if isinstance(element, (str, list, tuple)):
                yield from _flatten(element)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def _scan_list(text: str, start: int) -> tuple[list[str], int | None]:
    """Tolerant scanner for ``[a, 'b', "c's", ...``: the items and the index after ']' (None if unclosed).

    A quote only closes an item when a separator or ']' follows, so apostrophes inside items survive
    (``['Bayes' theorem']``). With an unclosed list, only items followed by a separator are kept: the last
    one may be cut off mid-word.
    """
    items: list[str] = []
    current: list[str] = []
    quote: str | None = None
    depth = 0  # parentheses / brackets inside an item: "SVM (linear kernel)"
    nest = 0  # inner lists, flattened: [["SVM"], ["RF"]]
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if quote is not None:
            if ch == "\\" and i + 1 < n:
                current.append(text[i + 1])
                i += 2
                continue
            if ch == quote and _closes_quote(text, i + 1):
                quote = None
            else:
                current.append(ch)
            i += 1
            continue
        blank = not "".join(current).strip()
        if ch in "\"'\u201c\u2018" and blank:
            quote = {"\u201c": "\u201d", "\u2018": "\u2019"}.get(ch, ch)
            current = []
        elif ch == "[" and blank and depth == 0:
            nest += 1
        elif ch in "[(":
            depth += 1
            current.append(ch)
        elif ch == "]" and depth == 0:
            items.append("".join(current))
            current = []
            if nest == 0:
                return items, i + 1
            nest -= 1
        elif ch in "])":
            depth = max(depth - 1, 0)
            current.append(ch)
        elif ch in ",;\n" and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    return items, None


def _closes_quote(text: str, index: int) -> bool:
    rest = text[index:index + 40].lstrip(" \t")
    return not rest or rest[0] in ",;]\n)"


# -- other shapes --------------------------------------------------------------------------------------------


def _from_json_object(text: str) -> list[str] | None:
    """``{"techniques": [...]}`` or ``{"answer": "SVM, RF"}`` (list values win over string values)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start or end - start > MAX_LITERAL_CHARS:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    lists = [v for v in value.values() if isinstance(v, list)]
    if lists:
        return _clean_all(_flatten(lists[0]), MAX_ITEM_WORDS)
    strings = [v for v in value.values() if isinstance(v, str)]
    return _clean_all((part for s in strings for part in re.split(r"[,;\n]", s)), MAX_ITEM_WORDS)


def _from_bullets(text: str) -> list[str]:
    items = []
    for line in text.splitlines():
        match = _BULLET.match(line)
        if match:
            name = _BOLD.sub(lambda m: m.group(1) or m.group(2), match.group("item"))
            items.append(_EXPLANATION.sub("", name))
    return _clean_all(items, MAX_ITEM_WORDS)


def _from_loose_text(text: str) -> list[str]:
    """A comma / semicolon / line list, possibly after a lead-in ("The techniques are: a, b and c.")."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    if len(lines) == 1 and ":" in lines[0]:
        lines = [lines[0].split(":", 1)[1]]
    elif len(lines) > 1 and lines[0].rstrip().endswith(":"):
        lines = lines[1:]
    parts = [part for line in lines for part in re.split(r"[,;]", line)]
    if len(parts) > 1:
        last = parts[-1].strip()
        if last.lower().startswith("and "):
            parts[-1] = last[4:]
    return [p for p in _clean_all(parts, MAX_LOOSE_WORDS) if not _is_chatter(p)]


def _is_chatter(item: str) -> bool:
    """Conversational filler a model wraps around (or gives instead of) a list: "I'm sorry", "but here it is"."""
    first = re.split(r"[\s,']", item.lower(), maxsplit=1)[0]
    return first in _CHATTER_STARTS


# -- items ---------------------------------------------------------------------------------------------------


def _clean_all(values: Iterable[str], max_words: int) -> list[str]:
    items = []
    for value in values:
        item = clean_item(value, max_words=max_words)
        if item is not None:
            items.append(item)
    return items


def clean_item(value: str, *, max_words: int = MAX_ITEM_WORDS) -> str | None:
    """One list item with quotes, bullets and stray punctuation stripped, or None when it is no name."""
    item = " ".join(str(value).split())
    previous = None
    while item != previous:
        previous = item
        item = item.strip().strip(_QUOTES).strip()
        item = item.rstrip(".,;:!?").lstrip("-*\u2022 ").strip()
    if item.startswith("(") and item.endswith(")") and item.count("(") == 1:
        item = item[1:-1].strip()
    if not item or not _HAS_LETTER.search(item):
        return None
    if len(item) > MAX_ITEM_CHARS or len(item.split()) > max_words:
        return None
    if item.lower() in _EMPTY_ANSWERS:
        return None
    return item


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    unique = []
    for item in items:
        key = item.casefold()
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique
