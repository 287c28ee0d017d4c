"""What the result cache holds, and removing part of it: a study of 1,000 papers leaves hundreds of MB, and an
interrupted thesis read's checkpoint (megabytes) stays until that run is repeated.

The file is opened as it is (never made, its journal mode left alone), with SQLite's busy timeout: a run using the
cache at the same time goes on (an entry removed under it is computed again), and one holding it locked past the
timeout is said to, in one line. Entries of old versions without a stage or a date are counted apart; an age filter
leaves the undated ones (nothing shows they are old).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from mlpsych.cache import CACHE_FILE, CHECKPOINT_STAGE, NORMALIZE_STAGE, READ_STAGE, cache_faults, fault_of
from mlpsych.errors import UserError

log = logging.getLogger(__name__)

# The stages runs write (the ``stage`` column), with what their entries are; tests check a run writes no other.
STAGES = {
    READ_STAGE: "a reader's answers for one paper, question and model (with the cascade's choice of windows)",
    NORMALIZE_STAGE: "the LLM's output for one prompt",
    CHECKPOINT_STAGE: "the saved state of a long read interrupted part-way, of use only to rerunning that run",
}
# How entries without a stage (written by older versions) are named here and in --stage.
UNKNOWN = "unknown"
BUSY_SECONDS = 30.0  # how long a run holding the file locked is waited for
DAY = 86400.0
BYTES = "SUM(LENGTH(key) + LENGTH(CAST(value AS BLOB)))"  # an entry's size: its key and its JSON, in UTF-8


@dataclass(frozen=True)
class StageStats:
    """One stage's entries: how many, their bytes (keys and values), and when the oldest and newest were written
    (None where none is dated); ``undated`` of them have no date."""

    stage: str
    entries: int
    bytes: int
    oldest: float | None
    newest: float | None
    undated: int


@dataclass(frozen=True)
class CacheStats:
    """The cache file of a folder: its size on disk (with its write-ahead log), the space a VACUUM would give back
    now (``free_bytes``), each stage's entries, and the folder's other things (ONNX exports: name -> bytes)."""

    path: Path
    disk_bytes: int
    free_bytes: int
    stages: list[StageStats]
    others: dict[str, int]

    @property
    def total(self) -> StageStats:
        dated = [s for s in self.stages if s.oldest is not None]
        return StageStats("total", sum(s.entries for s in self.stages), sum(s.bytes for s in self.stages),
                          min((s.oldest for s in dated), default=None),  # type: ignore[type-var]
                          max((s.newest for s in dated), default=None),  # type: ignore[type-var]
                          sum(s.undated for s in self.stages))


@dataclass(frozen=True)
class Selection:
    """Which entries a clear removes: of ``stages`` (None: every stage; ``UNKNOWN`` for those without one), written
    more than ``older_than_days`` before ``now`` (None: whatever their date; undated ones are never older)."""

    stages: frozenset[str] | None = None
    older_than_days: float | None = None
    now: float | None = None

    def __post_init__(self) -> None:
        if self.older_than_days is not None and not self.older_than_days >= 0:  # NaN too
            raise UserError(f"--older-than {self.older_than_days:g}: give a number of days, 0 or more")
        if self.now is None:  # one cut-off for the count shown and the entries removed
            object.__setattr__(self, "now", time.time())

    @property
    def cutoff(self) -> float | None:
        """The time (seconds since the epoch) before which an entry is older than asked; None: no age asked."""
        if self.older_than_days is None:
            return None
        return self.now - self.older_than_days * DAY  # type: ignore[operator]

    def where(self) -> tuple[str, list]:
        """The SQL condition and its parameters."""
        conditions, params = ["1"], []
        if self.stages is not None:
            names = sorted("" if s == UNKNOWN else s for s in self.stages)
            conditions.append(f"COALESCE(stage, '') IN ({', '.join('?' * len(names))})")
            params += names
        if self.cutoff is not None:
            conditions.append("created < ?")  # NULL is never less: undated entries stay
            params.append(self.cutoff)
        return " AND ".join(conditions), params


@dataclass(frozen=True)
class Cleared:
    """What a clear did: entries and bytes removed, the file's size on disk before and after; ``not_reclaimed``
    says why the space was not given back (a full disk: VACUUM needs room for a copy), None where it was."""

    entries: int
    bytes: int
    disk_before: int
    disk_after: int
    not_reclaimed: str | None = None


def cache_file(directory: Path) -> Path | None:
    """The cache file of ``directory``, or None where no run has made one there; a ``directory`` that is a file is
    refused."""
    if directory.exists() and not directory.is_dir():
        raise UserError(f"the cache folder {directory} is a file: give the folder a run's --cache names")
    path = directory / CACHE_FILE
    return path if path.is_file() else None


def disk_bytes(path: Path) -> int:
    """The file's size with its write-ahead log (where most of a busy cache's recent writes are)."""
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


def connect(path: Path, busy_seconds: float | None) -> sqlite3.Connection:
    """The cache file as it is (its journal mode is the runs' to set), refused where it is no SQLite file (the
    first read fails) or another program's (no results table). ``busy_seconds``: default ``BUSY_SECONDS``."""
    timeout = BUSY_SECONDS if busy_seconds is None else busy_seconds
    connection = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except BaseException:
        connection.close()
        raise
    if "results" not in tables:
        connection.close()
        raise UserError(f"{path} is no mlpsych result cache (an SQLite file without its results table): "
                        "move it away, or give the folder a run's --cache names")
    return connection


def stats(directory: Path, busy_seconds: float | None = None) -> CacheStats | None:
    """What the cache in ``directory`` holds, by stage (most bytes first); None where there is no cache file."""
    path = cache_file(directory)
    if path is None:
        return None
    with cache_faults(path, "read", then=""), closing(connect(path, busy_seconds)) as db:
        rows = db.execute(
            f"SELECT COALESCE(stage, ''), COUNT(*), {BYTES}, MIN(created), MAX(created), SUM(created IS NULL) "
            "FROM results GROUP BY COALESCE(stage, '')").fetchall()
        free = db.execute("PRAGMA freelist_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
        size = disk_bytes(path)
    stages = [StageStats(stage or UNKNOWN, entries, int(size_ or 0), oldest, newest, int(undated))
              for stage, entries, size_, oldest, newest, undated in rows]
    return CacheStats(path, size, free, sorted(stages, key=lambda s: (-s.bytes, s.stage)), others(directory))


def others(directory: Path) -> dict[str, int]:
    """The folder's other things (ONNX exports, a trained reader's checkpoints) with their bytes: not results,
    left alone by a clear."""
    found = {}
    for item in sorted(directory.iterdir()):
        if item.name.startswith(CACHE_FILE):
            continue
        files = [item] if not item.is_dir() else [Path(root, f) for root, _, names in os.walk(item) for f in names]
        found[item.name + ("/" if item.is_dir() else "")] = sum(map(file_bytes, files))
    return found


def file_bytes(path: Path) -> int:
    """A file's size; 0 for what is gone or unreadable meanwhile (an export a run is renaming into place)."""
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0


def check_stages(selection: Selection, db: sqlite3.Connection) -> None:
    """A stage that no run writes and the file does not hold is a typo: refused, naming the stages."""
    present = {row[0] or UNKNOWN for row in db.execute("SELECT DISTINCT COALESCE(stage, '') FROM results")}
    known = {*STAGES, *present, UNKNOWN}
    wrong = sorted((selection.stages or set()) - known)
    if wrong:
        raise UserError(f"--stage {', '.join(wrong)}: no such stage; the stages are {', '.join(sorted(known))} "
                        f"({UNKNOWN}: entries of older versions without one)")


def selected(db: sqlite3.Connection, selection: Selection) -> StageStats:
    """The entries ``selection`` names, counted (stage "selected")."""
    check_stages(selection, db)
    where, params = selection.where()
    entries, size, oldest, newest, undated = db.execute(
        f"SELECT COUNT(*), {BYTES}, MIN(created), MAX(created), SUM(created IS NULL) FROM results WHERE {where}",
        params).fetchone()
    return StageStats("selected", entries, int(size or 0), oldest, newest, int(undated or 0))


def matching(directory: Path, selection: Selection, busy_seconds: float | None = None) -> StageStats | None:
    """What a clear with ``selection`` would remove; None where there is no cache file."""
    path = cache_file(directory)
    if path is None:
        return None
    with cache_faults(path, "read", then=""), closing(connect(path, busy_seconds)) as db:
        return selected(db, selection)


def clear(directory: Path, selection: Selection, busy_seconds: float | None = None) -> Cleared | None:
    """Remove the entries ``selection`` names (one transaction: all or none), then give the space back (VACUUM and
    a checkpoint that empties the write-ahead log). None where there is no cache file."""
    path = cache_file(directory)
    if path is None:
        return None
    before = disk_bytes(path)
    with cache_faults(path, "cleared", then="; nothing was removed"), closing(connect(path, busy_seconds)) as db:
        db.execute("BEGIN IMMEDIATE")  # the count is of what is removed: no run adds to it in between
        try:
            removing = selected(db, selection)
            where, params = selection.where()
            db.execute(f"DELETE FROM results WHERE {where}", params)
            db.execute("COMMIT")
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
        not_reclaimed = reclaim(db)  # its faults are its result: the removal stands
    log.debug("removed %d entries from %s", removing.entries, path)
    return Cleared(removing.entries, removing.bytes, before, disk_bytes(path), not_reclaimed)


def reclaim(db: sqlite3.Connection) -> str | None:
    """VACUUM and an emptied write-ahead log; why not, where either failed (the removal stands, and the runs after
    it reuse the freed pages): a full disk (VACUUM needs room for a copy), another process reading."""
    try:
        if db.execute("PRAGMA freelist_count").fetchone()[0]:
            db.execute("VACUUM")
        # the log holds the vacuumed copy until no reader needs the old pages (with a rollback journal: no-op)
        busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.Error as error:
        fault = fault_of(error)
        return f"{fault.reason}: {fault.fix}"
    return "another process (a run?) is reading it" if busy else None
