"""Where a change kept beside a workbook (:mod:`mlpsych.journal`) goes in the workbook as it is now.

A change named only its row's number, and was trusted only while the workbook had the SHA-256 it was made on: a
workbook merely saved again from Excel (or rewritten by a sync tool) set every pending mark of the coder aside, to
be made again. Each change now says what identifies its row (:data:`IDENTITY`: the answer's cells, which the
review sets only in a row it adds) and what the cells it sets held before. It applies where a row of that identity
is now (rows sorted elsewhere move), when its cells still hold what they held before it or already hold what it,
or a later change of theirs, set; a change whose row is gone or whose cells were changed elsewhere is a conflict,
and only it is set aside. A change of a journal written before this (no identity) applies by its row number to the
very workbook it was made on, and is a conflict on any other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

IDENTITY = ("paper_id", "question_id", "bridge_entity", "stage", "models", "answer", "start", "end")

Change = tuple[int, dict[str, Any]]  # a row of the answers sheet (as a spreadsheet numbers it) and its new cells
Identity = tuple[str, ...]
RowsOf = Callable[[set[str]], Iterable[Mapping[str, Any]]]  # the rows (each with ``_row``) of these papers' ids


def cell_text(value: Any) -> str:
    """A cell as changes compare it: blank and empty text alike (a workbook saved again drops empty text), 3.0 as 3
    (a number saved again may come back a float)."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def identity(row: Mapping[str, Any]) -> Identity:
    return tuple(cell_text(row.get(name)) for name in IDENTITY)


def describe(row: int, values: dict[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    """A change's line: the row it was made at, its cells, its row's identity once made, the cells' values before
    it, and ``new`` for an added row (nowhere in the workbook until the change is applied)."""
    after = {**before, **values}
    line = {"row": row, "set": values, "key": {name: after.get(name) for name in IDENTITY},
            "was": {name: before.get(name) for name in values}}
    if not any(cell_text(before.get(name)) for name in IDENTITY):
        line["new"] = True
    return line


def rows_of(rows: list[Mapping[str, Any]]) -> RowsOf:
    """:data:`RowsOf` for ``read_sheet``'s rows."""
    return lambda papers: (row for row in rows if cell_text(row.get("paper_id")) in papers)


def resolve(lines: Iterable[tuple[int, dict[str, Any]]], rows: RowsOf, last_row: int,
            trusted: bool) -> tuple[list[Change], list[int]]:
    """The numbered change lines against the sheet (``rows``: its rows of the papers the lines name, as
    ``read_sheet`` gives them; ``last_row``: its last row's number): the cells to set, at the rows they are at now,
    and the numbers of the lines that conflict. ``trusted``: the workbook is the one the changes were made on (its
    SHA-256), where a line without identity applies at its row number. Only the named papers' rows are read: a
    whole sheet of a 1,000-paper study is seconds a save."""
    lines = list(lines)
    if not lines:
        return [], []
    sheet = _Sheet(rows({cell_text(line["key"].get("paper_id")) for _, line in lines if "key" in line}), last_row)
    later = _later_values(lines)
    changes: list[Change] = []
    conflicts: list[int] = []
    for (number, line), after in zip(lines, later):
        if "key" not in line:
            row = int(line["row"]) if trusted else None
            cells = dict(line["set"]) if trusted else None
        else:
            row = sheet.place(line)
            cells = None if row is None else sheet.to_set(row, line, after)
        if row is None or cells is None:
            conflicts.append(number)
        elif cells:
            sheet.set(row, cells)
            changes.append((row, cells))
    return changes, conflicts


def _later_values(lines: list[tuple[int, dict[str, Any]]]) -> list[dict[str, set[str]]]:
    """For each line, the values later lines of its row (by identity: its number may differ between two sessions
    with a sort between them) set in each of its cells: a workbook holding one was written with the changes up to
    it."""
    seen: dict[tuple[Identity, str], set[str]] = {}
    out: list[dict[str, set[str]]] = []
    for _, line in reversed(lines):
        target = identity(line.get("key") or {})
        out.append({name: set(seen.get((target, name), ())) for name in line["set"]})
        for name, value in line["set"].items():
            seen.setdefault((target, name), set()).add(cell_text(value))
    return out[::-1]


class _Sheet:
    """The rows as the changes so far left them, found by identity."""

    def __init__(self, rows: Iterable[Mapping[str, Any]], last_row: int) -> None:
        self.rows: dict[int, Mapping[str, Any]] = {int(row["_row"]): row for row in rows}
        self.last_row = max(last_row, *self.rows, 1)
        self.set_here: dict[tuple[int, str], Any] = {}
        self.at: dict[Identity, list[int]] = {}
        for number, row in self.rows.items():
            self.at.setdefault(identity(row), []).append(number)
        self.placed: dict[tuple[int, Identity], int] = {}  # (row a change was made at, identity) -> row now

    def get(self, row: int, name: str) -> Any:
        if (row, name) in self.set_here:
            return self.set_here[row, name]
        return self.rows.get(row, {}).get(name)

    def set(self, row: int, cells: dict[str, Any]) -> None:
        self.last_row = max(self.last_row, row)  # a row added by an old journal's line: an added row goes after it
        self.set_here.update(((row, name), value) for name, value in cells.items())

    def place(self, line: dict[str, Any]) -> int | None:
        """The row the line's change is at now: the one of its identity (where several are, the row it was made
        at, else one no other change was placed at), a new last row for an added row not in the workbook yet, None
        when its row is gone. A row keeps its identity in every session, its number only until a sort."""
        made_at, key = int(line["row"]), identity(line["key"])
        if (made_at, key) in self.placed:
            return self.placed[made_at, key]
        taken = set(self.placed.values())
        found = sorted(self.at.get(key, []), key=lambda row: (row != made_at, row in taken))
        if found:
            row = found[0]
        elif line.get("new"):  # after the last row, as the review added it (the workbook may have rows fewer or more)
            row = self.last_row = self.last_row + 1
            self.at.setdefault(key, []).append(row)
        else:
            return None
        self.placed[made_at, key] = row
        return row

    def to_set(self, row: int, line: dict[str, Any], later: dict[str, set[str]]) -> dict[str, Any] | None:
        """The cells of the line to set at ``row``: none that already holds its new value (or a later change's),
        those that hold what they held before the change; None when a cell holds anything else."""
        cells = {}
        for name, value in line["set"].items():
            now = cell_text(self.get(row, name))
            if now == cell_text(value) or now in later[name]:
                continue
            if now != cell_text(line["was"].get(name)):
                return None
            cells[name] = value
        return cells
