"""Seeing and clearing the result cache (mlpsych.cache_admin) on real cache files: entries of several stages and
ages written through ResultCache, their dates then set in SQL."""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from mlpsych import cache as cache_module
from mlpsych.cache import ResultCache
from mlpsych.cache_admin import DAY, STAGES, UNKNOWN, Selection, clear, matching, stats
from mlpsych.errors import CacheError, UserError

from cache_entries import ENTRIES, NOW, entry_bytes, fill, keys, value

def test_stats_count_entries_bytes_and_dates_by_stage(tmp_path: Path) -> None:
    folder = fill(tmp_path / "cache")
    (folder / "onnx" / "abc").mkdir(parents=True)
    (folder / "onnx" / "abc" / "model.onnx").write_bytes(b"\0" * 1234)
    found = stats(folder)
    assert found is not None and found.path == folder / "results.sqlite"
    by_stage = {row.stage: row for row in found.stages}
    assert set(by_stage) == {"read", "normalize", "read-checkpoint", UNKNOWN}
    for stage, row in by_stage.items():
        mine = [k for k, (s, _, _) in ENTRIES.items() if (s or UNKNOWN) == stage]
        ages = [ENTRIES[k][1] for k in mine if ENTRIES[k][1] is not None]
        assert row.entries == len(mine)
        assert row.bytes == sum(entry_bytes(k) for k in mine)
        assert row.oldest == pytest.approx(NOW - max(ages) * DAY) and row.newest == pytest.approx(NOW - min(ages) * DAY)
        assert row.undated == sum(ENTRIES[k][1] is None for k in mine)
    assert [row.stage for row in found.stages][0] == "read-checkpoint"  # the most bytes first
    assert found.total.entries == len(ENTRIES) and found.total.undated == 1
    assert found.total.bytes == sum(entry_bytes(k) for k in ENTRIES)
    assert found.disk_bytes >= os.path.getsize(folder / "results.sqlite") > 0
    assert found.others == {"onnx/": 1234}  # the folder's other things, not results


@pytest.mark.parametrize(("selection", "removed"), [
    (Selection(frozenset({"read-checkpoint"}), now=NOW), {"checkpoint-old", "checkpoint-new"}),
    (Selection(older_than_days=20, now=NOW), {"read-old", "llm-old", "checkpoint-old", "legacy-dated"}),
    (Selection(frozenset({"read-checkpoint"}), 7, now=NOW), {"checkpoint-old"}),
    (Selection(frozenset({"read", "normalize"}), 1.5, now=NOW), {"read-old", "llm-old", "llm-new"}),
    (Selection(frozenset({UNKNOWN}), now=NOW), {"legacy-undated", "legacy-dated"}),
    (Selection(frozenset({UNKNOWN}), 0, now=NOW), {"legacy-dated"}),  # an undated entry is never "older"
    (Selection(now=NOW), set(ENTRIES)),
])
def test_clear_removes_the_stages_and_ages_asked_for(tmp_path: Path, selection: Selection, removed: set) -> None:
    folder = fill(tmp_path / "cache")
    assert matching(folder, selection).entries == len(removed)
    done = clear(folder, selection)
    assert (done.entries, done.bytes) == (len(removed), sum(entry_bytes(k) for k in removed))
    assert keys(folder) == set(ENTRIES) - removed
    assert done.not_reclaimed is None


def test_clearing_checkpoints_gives_their_space_back(tmp_path: Path) -> None:
    """Deleted rows only free pages inside the file: VACUUM (and a checkpoint emptying the write-ahead log) gives
    them back to the disk."""
    big = {f"checkpoint-{i}": ("read-checkpoint", 10, 400_000) for i in range(6)}  # 800 kB each in UTF-8
    folder = fill(tmp_path / "cache", {**ENTRIES, **big})
    before = sum(os.path.getsize(p) for p in folder.glob("results.sqlite*"))
    done = clear(folder, Selection(frozenset({"read-checkpoint"})))
    after = sum(os.path.getsize(p) for p in folder.glob("results.sqlite*"))
    assert done.entries == 8 and done.bytes > 4_800_000
    assert before - after > 0.95 * done.bytes and done.disk_after < 100_000
    assert keys(folder) == {k for k, (stage, _, _) in ENTRIES.items() if stage != "read-checkpoint"}
    with closing(sqlite3.connect(folder / "results.sqlite")) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_reader_holding_the_old_pages_leaves_the_space_for_the_next_clear(tmp_path: Path) -> None:
    folder = fill(tmp_path / "cache")
    with closing(sqlite3.connect(folder / "results.sqlite", isolation_level=None)) as run:
        run.execute("BEGIN")
        run.execute("SELECT COUNT(*) FROM results").fetchone()  # a snapshot the checkpoint may not overwrite
        done = clear(folder, Selection(frozenset({"read-checkpoint"})), busy_seconds=0.1)
        run.execute("COMMIT")
    assert done.entries == 2 and done.not_reclaimed == "another process (a run?) is reading it"
    again = clear(folder, Selection(frozenset({"read-checkpoint"})))
    assert again.entries == 0 and again.not_reclaimed is None and again.disk_after < done.disk_after


def test_a_run_writing_meanwhile_goes_on_and_keeps_what_it_writes(tmp_path: Path) -> None:
    folder = fill(tmp_path / "cache")
    run = ResultCache(folder)
    started, written = threading.Event(), []

    def write() -> None:
        for i in range(300):
            run.put(f"new-{i}", value(500), stage="normalize")
            written.append(f"new-{i}")
            started.set()

    writer = threading.Thread(target=write)
    writer.start()
    started.wait()
    done = clear(folder, Selection(frozenset({"read", "read-checkpoint"})))
    writer.join()
    assert done.entries == 4
    assert keys(folder) == set(ENTRIES) - {"read-old", "read-new", "checkpoint-old", "checkpoint-new"} | set(written)
    assert run.get("new-299") == value(500)
    run.close()
    with closing(sqlite3.connect(folder / "results.sqlite")) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_cache_another_process_holds_locked_is_one_line_and_nothing_is_removed(tmp_path: Path) -> None:
    folder = fill(tmp_path / "cache")
    with closing(sqlite3.connect(folder / "results.sqlite", isolation_level=None)) as run:
        run.execute("BEGIN IMMEDIATE")  # a run's write in progress, past the busy timeout
        with pytest.raises(CacheError) as error:
            clear(folder, Selection(frozenset({"read"})), busy_seconds=0.1)
        run.execute("ROLLBACK")
    assert str(error.value) == (f"the result cache {folder / 'results.sqlite'} cannot be cleared (database is "
                                "locked): another process (a run?) is using it: try again once it is done; nothing "
                                "was removed")
    assert keys(folder) == set(ENTRIES)


def test_a_folder_without_a_cache_file_holds_nothing_and_makes_none(tmp_path: Path) -> None:
    assert stats(tmp_path) is None and clear(tmp_path, Selection()) is None
    assert stats(tmp_path / "missing") is None and not (tmp_path / "missing").exists()
    assert list(tmp_path.iterdir()) == []


def another_programs_database(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE notes (a)")


@pytest.mark.parametrize(("make", "says"), [
    (lambda folder: (folder / "results.sqlite").write_bytes(b"not a database " * 100),
     "(file is not a database): delete it (its results are computed again)"),
    (lambda folder: another_programs_database(folder / "results.sqlite"),
     "is no mlpsych result cache (an SQLite file without its results table)"),
])
def test_a_file_that_is_no_result_cache_is_one_line(tmp_path: Path, make, says: str) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    make(folder)
    for look in (lambda: stats(folder), lambda: clear(folder, Selection())):
        with pytest.raises(UserError) as error:
            look()
        assert says in str(error.value) and "\n" not in str(error.value)


def test_a_cache_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("x")
    with pytest.raises(UserError, match="is a file: give the folder a run's --cache names"):
        stats(tmp_path / "cache")


def test_a_cache_this_user_may_only_read_is_shown_and_not_cleared(tmp_path: Path, monkeypatch) -> None:
    """Simulated with SQLite's read-only mode, as tests may run as root (who may write anything)."""
    folder = fill(tmp_path / "cache")
    connect = sqlite3.connect
    monkeypatch.setattr(cache_module.sqlite3, "connect",
                        lambda path, **options: connect(f"file:{path}?mode=ro", uri=True, **options))
    assert stats(folder).total.entries == len(ENTRIES)
    with pytest.raises(CacheError) as error:
        clear(folder, Selection(frozenset({"read"})))
    assert str(error.value) == (f"the result cache {folder / 'results.sqlite'} cannot be cleared (attempt to write a "
                                "readonly database): make it readable and writable for you (its owner can); nothing "
                                "was removed")
    monkeypatch.undo()
    assert keys(folder) == set(ENTRIES)


def test_a_stage_no_run_writes_is_refused_naming_the_stages(tmp_path: Path) -> None:
    folder = fill(tmp_path / "cache")
    with pytest.raises(UserError) as error:
        clear(folder, Selection(frozenset({"checkpoint"})))
    assert str(error.value) == ("--stage checkpoint: no such stage; the stages are normalize, read, read-checkpoint, "
                                "unknown (unknown: entries of older versions without one)")
    assert keys(folder) == set(ENTRIES)


@pytest.mark.parametrize("days", [-1, float("nan")])
def test_a_negative_age_is_refused(days: float) -> None:
    with pytest.raises(UserError, match="give a number of days, 0 or more"):
        Selection(older_than_days=days)
