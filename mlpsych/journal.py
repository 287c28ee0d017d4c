"""The review's changes to a results workbook, kept in a small file beside it until they are written into it.

Writing a workbook is openpyxl writing every sheet: about 30 s a change for a 1,000-paper study's 16 MB workbook,
and the review wrote it on every mark. Each change (cells of one row of the ``answers`` sheet) is now appended to
``<stem>-changes.jsonl`` beside the workbook and forced to disk, and the review writes the workbook when the coder
leaves a paper or downloads it (:meth:`mlpsych.app.review.ReviewSheet.save`), after which the file is removed.
Until then the workbook and this file are the coded sheet together: the review reopens with the changes, and
``read_sheet`` (``mlpsych agree``, ``adapt``, ``calibrate``, ``eval``, a rerun's check for coding) applies them, so
every reader of a coded sheet sees the same marks.

The file's first line holds the SHA-256 of the workbook its changes apply to. A workbook that is no longer that
one was either written with the changes (the line ``{"written": <its hash>}`` is added before it replaces the old
one, so a stop between the two is told apart) or changed elsewhere (saved from Excel): then the changes are not
applied to it, and a warning says so and where they are. This module imports nothing of the commands, so each can
import it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable

logger = logging.getLogger(__name__)

Change = tuple[int, dict[str, Any]]  # a row of the answers sheet (as a spreadsheet numbers it) and its new cells


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

    def state(self) -> tuple[str, list[Change]]:
        """("none" | "pending" | "written" | "stale", the changes). "pending": changes the workbook lacks;
        "written": the workbook holds them (the file is left over); "stale": the workbook was changed elsewhere."""
        lines = self._lines()
        if not lines or not self.workbook.is_file():
            return "none", []
        changes = [(int(line["row"]), dict(line["set"])) for line in lines[1:] if "row" in line]
        current = file_hash(self.workbook)
        if any(line.get("written") == current for line in lines[1:]):
            return "written", changes
        if lines[0].get("sha256") == current:
            return "pending", changes
        return "stale", changes

    def pending(self) -> list[Change]:
        """The changes the workbook lacks, in the order they were made; none, with a warning, when the workbook
        was changed elsewhere since they were made."""
        state, changes = self.state()
        if state == "stale":
            logger.warning("%s: %d change(s) made in the review are not applied: %s was changed elsewhere after them "
                           "(saved from Excel?). They are kept in %s.", self.workbook, len(changes), self.workbook.name,
                           self.path)
        return changes if state == "pending" else []

    def record(self, row: int, values: dict[str, Any]) -> None:
        """Append one change and force it to disk; the first change after a write starts the file (raises
        OSError)."""
        line = json.dumps({"row": row, "set": values}, ensure_ascii=False, default=str) + "\n"
        if not self.path.exists():
            line = json.dumps({"workbook": self.workbook.name, "sha256": file_hash(self.workbook)}) + "\n" + line
        self._append(line)

    def written(self, partial: Path) -> None:
        """Say that ``partial``, about to replace the workbook, holds every change here (before it does)."""
        if self.path.exists():
            self._append(json.dumps({"written": file_hash(partial)}) + "\n")

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def set_aside(self) -> Path:
        """Move a stale file out of the way (kept, never deleted); its new name."""
        n = 1
        while (aside := self.path.with_name(f"{self.path.stem}-not-applied-{n}.jsonl")).exists():
            n += 1
        os.replace(self.path, aside)
        return aside

    def _append(self, text: str) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


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
