"""Where a kept change of the review goes in a workbook as it is now: by its row's content, not its number."""

from __future__ import annotations

from mlpsych.journal_match import describe, resolve, rows_of


def resolved(kept: list[tuple[int, dict]], rows: list[dict], trusted: bool = False) -> tuple[list, list[int]]:
    """(changes to apply, lines in conflict) of ``kept`` on a sheet of ``rows``."""
    return resolve(kept, rows_of(rows), max((r["_row"] for r in rows), default=1), trusted=trusted)


def row(number: int, answer: str, paper: str = "A", **cells) -> dict:
    return {"_row": number, "paper_id": paper, "question_id": "q1", "stage": "extractive", "models": "m",
            "answer": answer, "start": len(answer), "end": 2 * len(answer), **cells}


def lines(*changes: tuple[int, dict, dict]) -> list[tuple[int, dict]]:
    """The numbered lines of changes (row made at, cells set, the row's cells before)."""
    return [(n, describe(made_at, values, before)) for n, (made_at, values, before) in enumerate(changes, start=1)]


def test_a_change_follows_its_row_to_where_a_sort_moved_it():
    before = [row(2, "forests"), row(3, "students")]
    sorted_elsewhere = [row(2, "students"), row(3, "forests")]
    kept = lines((3, {"correct": "no"}, before[1]), (2, {"correct": "yes"}, before[0]))
    assert resolved(kept, sorted_elsewhere) == ([(2, {"correct": "no"}), (3, {"correct": "yes"})], [])


def test_a_workbook_holding_a_later_value_of_a_cell_takes_the_changes_up_to_it():
    """Marked yes, then no, then taken back: a workbook written after the second holds "no"."""
    first = row(2, "forests")
    kept = lines((2, {"correct": "yes"}, first), (2, {"correct": "no"}, first | {"correct": "yes"}),
                 (2, {"correct": None}, first | {"correct": "no"}))
    assert resolved(kept, [first | {"correct": "no"}]) == ([(2, {"correct": None})], [])
    assert resolved(kept[:2], [first | {"correct": "no"}]) == ([], [])


def test_a_cell_changed_elsewhere_or_a_row_gone_is_a_conflict_and_the_others_apply():
    rows = [row(2, "forests"), row(3, "students"), row(4, "caret")]
    kept = lines((2, {"correct": "yes"}, rows[0]), (3, {"correct": "no"}, rows[1]), (4, {"notes": "x"}, rows[2]))
    now = [rows[0], rows[1] | {"correct": "yes"}]  # students marked elsewhere, caret deleted
    assert resolved(kept, now) == ([(2, {"correct": "yes"})], [2, 3])


def test_an_added_row_goes_after_the_last_row_once_and_takes_its_later_changes():
    rows = [row(2, "forests"), row(3, "students")]
    added = row(0, "baseline", stage="coder") | {"correct": "yes"}
    del added["_row"]
    kept = lines((4, added, {}), (4, {"notes": "seen"}, added))
    assert resolved(kept, rows[:1]) == ([(3, added), (3, {"notes": "seen"})], [])
    assert resolved(kept, [*rows, row(4, "forests", paper="B")]) == ([(5, added), (5, {"notes": "seen"})], [])
    assert resolved(kept, [*rows, added | {"_row": 7}]) == ([(7, {"notes": "seen"})], [])


def test_two_rows_alike_each_take_their_own_change():
    rows = [row(2, "forests"), row(3, "forests")]
    kept = lines((2, {"correct": "yes"}, rows[0]), (3, {"correct": "no"}, rows[1]))
    moved = [row(5, "forests"), row(6, "forests")]
    assert resolved(kept, moved) == ([(5, {"correct": "yes"}), (6, {"correct": "no"})], [])


def test_a_line_without_identity_applies_by_number_only_to_its_own_workbook():
    old = [(1, {"row": 3, "set": {"correct": "no"}})]
    rows = [row(2, "forests"), row(3, "students")]
    assert resolved(old, rows, trusted=True) == ([(3, {"correct": "no"})], [])
    assert resolved(old, rows) == ([], [1])
