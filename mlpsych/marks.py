"""A coder's mark on a results sheet's answer, read one way by ``mlpsych agree``, ``calibrate`` and ``adapt``
(and ``run --keep-coding``), as are which rows a coder added (:func:`row_stage`), which are the paper's answers
(:func:`is_final`) and what a coded row leaves among them (:func:`coded_answer`).

A coder marks each answer in ``correct`` (another coder in ``correct_<name>``) and may write what the answer should
have been in ``corrected_answer`` (``corrected_answer_<name>``). :func:`verdict` is the one reading of the two: the
precision a study reports, the calibrator's labels and the spans a reader is adapted on all count the same answers
right and wrong. This module imports nothing of the commands, so each can import it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from mlpsych.answers import AnswerStage
from mlpsych.evaluation.metrics import normalize_answer
from mlpsych.normalize.grounding import fold_accents

logger = logging.getLogger(__name__)

# Ticks and crosses as typed or picked, and yes/no in the languages coders often mark in ("si" without its accent
# too). An "x" is not one: some coders tick with it, others cross out with it.
_TRUE = {"yes", "y", "1", "true", "t", "✓", "✔", "☑", "✅", "√", "correct", "right", "ok", "ja", "oui", "sí", "sì",
         "si"}
_FALSE = {"no", "n", "0", "false", "f", "✗", "✘", "❌", "❎", "✖", "☒", "×", "incorrect", "wrong", "nein", "non"}
# An emoji picker types "✔️" as the mark and a variation selector (U+FE0F) asking for its colour form: dropped.
_NO_VARIATION = str.maketrans("", "", "\ufe0e\ufe0f")
UNREADABLE_HINT = 'use yes/no; an "x" is read neither way: some coders tick with it, others cross out'


def parse_code(value: Any) -> bool | None:
    """A coder's mark as True/False; None for a blank cell. Raises ValueError for anything unreadable."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        if value in (0, 1):
            return bool(value)
        raise ValueError(value)
    text = str(value).translate(_NO_VARIATION).strip().lower().rstrip(".")
    if not text:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(value)


def row_stage(row: dict[str, Any]) -> str:
    """A sheet row's ``stage``, lower-cased. A row typed into a results sheet by hand leaves it blank: that is an
    answer a coder added (``coder``, as the review view writes one), not the tool's; a sheet without the column at
    all says nothing of its rows' stages (blank). Read three ways before: ``agree`` and ``adapt`` took such a row
    for the tool's answer, ``--keep-coding`` for a coder's."""
    stage = str(row.get("stage") or "").strip().lower()
    return AnswerStage.CODER.value if not stage and "stage" in row else stage


def is_final(row: dict[str, Any]) -> bool:
    """Whether a row is one of the paper's answers: its ``final`` cell (true/false, yes/no, 1/0), else (blank, or a
    sheet without the column) any row but an ungrounded LLM item; a run that keeps ungrounded items (the reference
    preset) writes them as final. ``calibrate`` read a blank cell as not final, and "no" as final, where ``agree``
    read both the other way."""
    value = row.get("final")
    if isinstance(value, bool):
        return value
    text = str(value if value is not None else "").strip().lower()
    if text in _FINAL:
        return _FINAL[text]
    return row_stage(row) != AnswerStage.UNGROUNDED.value


_FINAL = {"true": True, "1": True, "yes": True, "y": True, "t": True,
          "false": False, "0": False, "no": False, "n": False, "f": False}


def verdict(row: dict[str, Any], coder: str = "correct") -> bool | None:
    """Whether ``coder`` (a ``correct`` column) judged the row's answer right; None: not judged. Raises ValueError
    for an unreadable mark (:func:`warn_unreadable` names those).

    The mark the coder wrote wins: it is the variable the coding study measures, the one agreement between coders
    is computed on, and a coder who marks "yes" and writes a correction most often gives a cleaner span of an
    answer they accept (or retypes it). A correction stands in for a missing mark only: the review view writes one
    without a mark, and an answer a coder had to fix was not right, so it counts as marked wrong (left uncounted,
    the answers coders fixed would not lower precision). A "correction" that is the answer itself (case, accents,
    punctuation, articles aside) corrects nothing and leaves an unmarked answer unjudged."""
    mark = parse_code(row.get(coder))
    if mark is not None:
        return mark
    corrected = str(row.get("corrected_answer" + coder[len("correct"):]) or "").strip()
    if not corrected or _same_answer(corrected, str(row.get("answer") or "")):
        return None
    return False


def coded_answer(row: dict[str, Any]) -> str | None:
    """The answer a row leaves among the paper's answers once coded, as a follow-up of a rerun asks about it (``run
    --keep-coding``): a final row's correction where it has one (the text the coder says the answer is, whatever
    the mark), else its answer unless judged wrong (:func:`verdict`: an answer a coder added stands until marked
    wrong, as one left unmarked); None for a row judged wrong or not final (:func:`is_final`). Raises ValueError
    for an unreadable mark."""
    if not is_final(row):
        return None
    corrected = str(row.get("corrected_answer") or "").strip()
    if corrected:
        return corrected
    answer = str(row.get("answer") or "").strip()
    return answer if answer and verdict(row) is not False else None


def _same_answer(a: str, b: str) -> bool:
    """Whether two answers differ only as a retyped one does (case, accents, punctuation, articles, spacing)."""
    return normalize_answer(fold_accents(a)) == normalize_answer(fold_accents(b))


def warn_unreadable(rows: Sequence[dict[str, Any]], coders: Sequence[str], source: str | Path) -> None:
    """One warning for the marks :func:`parse_code` cannot read (a typo, an "x"): they are skipped, and a coder
    should know which before trusting what was counted."""
    bad = []
    for row in rows:
        for coder in coders:
            try:
                parse_code(row.get(coder))
            except ValueError:
                bad.append(f"row {row.get('_row')} {coder}={row.get(coder)!r}")
    if bad:
        logger.warning("%s: skipped %d unreadable mark(s) (%s): %s", source, len(bad), UNREADABLE_HINT,
                       "; ".join(bad[:5]))
