"""The review's changes to a results workbook, kept in a small file beside it until they are written into it.

Writing a workbook took seconds at a big study's size (30 s with openpyxl writing every sheet, 3 s now that the
review rewrites the answers sheet alone: :mod:`mlpsych.workbook`), and the review wrote it on every mark. Each
change (cells of one row of the ``answers`` sheet) is now appended to
``<stem>-changes.jsonl`` beside the workbook and forced to disk, and the review writes the workbook when the coder
leaves a paper or downloads it (:meth:`mlpsych.app.review.ReviewSheet.save`), or half a minute after the last
change, after which the file is removed.
Until then the workbook and this file are the coded sheet together: the review reopens with the changes, and
``read_sheet`` (``mlpsych agree``, ``adapt``, ``calibrate``, ``eval``, a rerun's check for coding) applies them, so
every reader of a coded sheet sees the same marks.

The file's first line holds the SHA-256 of the workbook the changes were made on; a workbook written with the
changes is told by the line ``{"written": <its hash>}``, added before it replaces the old one (so a stop between
the two is told apart). Otherwise each change is applied by its row's content (:mod:`mlpsych.journal_match`), so a
workbook saved again from Excel, even sorted, takes the coder's pending marks; only a change whose answer is gone
or whose cells were changed elsewhere is not applied, and a warning says so and where it is kept. This module
imports nothing of the commands, so each can import it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpsych.files import first_free
from mlpsych.journal_match import Change, RowsOf, describe, resolve, rows_of

logger = logging.getLogger(__name__)


def journal_path(workbook: str | Path) -> Path:
    """``results-changes.jsonl`` beside ``results.xlsx`` (as the review keeps ``results-texts.jsonl``)."""
    workbook = Path(workbook)
    return workbook.with_name(f"{workbook.stem}-changes.jsonl")


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Kept:
    """What the changes kept beside a workbook do to it as it is now."""

    changes: list[Change] = field(default_factory=list)  # the cells to set, at the rows they are at now
    conflicts: list[int] = field(default_factory=list)  # the file's lines whose row is gone or cells changed since
    written: bool = False  # the workbook holds every change (the file is left over)


def not_applied(count: int, workbook: Path, kept_in: Path) -> str:
    """The one message for changes in conflict with the workbook."""
    return (f"{count} change(s) made in the review were not applied to {workbook.name}: their answers are no longer "
            f"in it, or their cells were changed there since (in Excel?). They are kept in {kept_in}.")


class Journal:
    """The changes file of one workbook."""

    def __init__(self, workbook: str | Path) -> None:
        self.workbook = Path(workbook)
        self.path = journal_path(self.workbook)

    def _lines(self) -> list[dict[str, Any]]:
        """The file's lines; a last line cut short by a stop while it was written is left out (its change was never
        reported saved)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = []
        for line in text.splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return lines

    def state(self, rows: RowsOf, last_row: int) -> Kept:
        """What the changes do to the workbook, whose answers sheet has ``rows`` (read only when there are
        changes, of the papers they name) and ends at ``last_row``."""
        lines = self._lines()
        if not lines or not self.workbook.is_file():
            return Kept()
        current = file_hash(self.workbook)
        if any(line.get("written") == current for line in lines[1:]):
            return Kept(written=True)
        changes, conflicts = resolve(_changes(lines), rows, last_row, trusted=lines[0].get("sha256") == current)
        return Kept(changes, conflicts)

    def pending(self, rows: list[dict[str, Any]]) -> list[Change]:
        """The changes the workbook with ``rows`` (``read_sheet``'s) lacks, in the order they were made, less those
        in conflict with it (said in a warning)."""
        kept = self.state(rows_of(rows), max((row["_row"] for row in rows), default=1))
        if kept.conflicts:
            logger.warning("%s", not_applied(len(kept.conflicts), self.workbook, self.path))
        return kept.changes

    def record(self, row: int, values: dict[str, Any], before: Mapping[str, Any]) -> None:
        """Append one change (``before``: its row's cells before it, blank for an added row) and force it to
        disk; the first change after a write starts the file (raises OSError)."""
        line = json.dumps(describe(row, values, before), ensure_ascii=False, default=str) + "\n"
        if not self.path.exists():
            line = json.dumps({"workbook": self.workbook.name, "sha256": file_hash(self.workbook)}) + "\n" + line
        self._append(line)

    def written(self, partial: Path) -> None:
        """Say that ``partial``, about to replace the workbook, holds every change here (before it does)."""
        if self.path.exists():
            self._append(json.dumps({"written": file_hash(partial)}) + "\n")

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def set_aside(self, conflicts: list[int]) -> Path:
        """Copy the changes in conflict (:attr:`Kept.conflicts`) to a file of their own (kept, never deleted) and
        mark them set aside here, or remove this file when they were all it still applied; the copy's name."""
        aside = first_free(lambda n: self.path.with_name(f"{self.path.stem}-not-applied-{n}.jsonl"))
        lines = self._lines()
        kept = lines[:1] + [lines[number] for number in conflicts]
        with aside.open("x", encoding="utf-8") as f:
            f.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in kept)
            f.flush()
            os.fsync(f.fileno())
        if {number for number, _ in _changes(lines)} <= set(conflicts):
            self.clear()
        else:
            self._append(json.dumps({"set_aside": conflicts, "in": aside.name}) + "\n")
        return aside

    def _append(self, text: str) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def _changes(lines: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """The change lines of the file, numbered, less those set aside."""
    aside = {number for line in lines[1:] for number in line.get("set_aside", ())}
    return [(number, line) for number, line in enumerate(lines) if number and "row" in line and number not in aside]


def apply_to_rows(rows: list[dict[str, Any]], changes: Iterable[Change]) -> list[dict[str, Any]]:
    """``read_sheet``'s rows (each with ``_row``) with the changes applied: cells set, rows added, and a column a
    change names (a second coder's ``correct_2``) given to every row, blank where it was not set."""
    changes = list(changes)
    if not changes:
        return rows
    by_row = {row["_row"]: row for row in rows}
    names = list(dict.fromkeys(name for row in rows[:1] for name in row))
    for number, values in changes:
        row = by_row.get(number)
        if row is None:
            row = by_row[number] = {name: None for name in names if name != "_row"} | {"_row": number}
        row.update(values)
    columns = {name for _, values in changes for name in values}
    out = sorted(by_row.values(), key=lambda r: r["_row"])
    for row in out:
        for name in columns:
            row.setdefault(name, None)
    return out
