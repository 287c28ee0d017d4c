"""The result cache's SQLite file on a network file system, where WAL does not work."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from mlpsych import cache as cache_module
from mlpsych.cache import ResultCache

MOUNTS = """\
/dev/sda1 / ext4 rw,relatime 0 0
server:/export/home /home nfs4 rw,relatime,vers=4.2 0 0
/dev/sdb1 /home/ann/scratch ext4 rw 0 0
lustre@o2ib:/fs /lustre/lab\\040group lustre rw,flock 0 0
tmpfs /tmp tmpfs rw 0 0
"""


@pytest.mark.parametrize(("path", "kind"), [
    ("/home/ann/.cache/mlpsych", "nfs4"),
    ("/home", "nfs4"),
    ("/home/ann/scratch/cache", "ext4"),  # a local disk mounted inside the NFS home
    ("/homework/cache", "ext4"),  # a name that starts like a mount point is not under it
    ("/lustre/lab group/cache", "lustre"),  # spaces are written \040 in the table
    ("/tmp/x", "tmpfs"),
])
def test_the_file_system_of_a_folder_is_read_from_the_mount_table(tmp_path: Path, path: str, kind: str) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(MOUNTS, encoding="utf-8")
    assert cache_module.file_system_type(Path(path), mounts) == kind


def test_without_a_mount_table_the_file_system_is_not_known(tmp_path: Path) -> None:
    assert cache_module.file_system_type(tmp_path, tmp_path / "no-such-table") is None


def journal_mode(folder: Path) -> str:
    with closing(sqlite3.connect(folder / "results.sqlite")) as conn:  # closed: an open one keeps WAL in place
        return conn.execute("PRAGMA journal_mode").fetchone()[0]


def test_a_cache_on_a_network_file_system_keeps_a_rollback_journal(tmp_path: Path, monkeypatch, caplog) -> None:
    """SQLite's WAL mode does not work on a network file system (its index is shared memory, which a process on
    another machine does not see): two runs on two cluster nodes sharing an NFS home folder, or Ray workers on
    other nodes caching in it, could damage the cache, and nothing said so. There the cache keeps a rollback
    journal (file locks only), and says so; a WAL cache made there before is switched, its results kept."""
    folder = tmp_path / "cache"
    local = ResultCache(folder)
    local.put("k", {"answer": "random forests"})
    local.close()
    assert journal_mode(folder) == "wal"
    monkeypatch.setattr(cache_module, "file_system_type", lambda path: "nfs4", raising=False)
    with caplog.at_level(logging.INFO, logger="mlpsych.cache"):
        shared = ResultCache(folder)
    assert journal_mode(folder) == "delete"
    assert shared.get("k") == {"answer": "random forests"}
    shared.put("k2", [1])
    shared.close()
    assert "is on a network file system (nfs4), where SQLite's WAL mode does not work" in caplog.text
    assert sorted(p.name for p in folder.iterdir()) == ["results.sqlite"]  # no -wal or -shm file


def test_a_wal_cache_another_process_holds_open_is_used_as_it_is(tmp_path: Path, monkeypatch) -> None:
    """Leaving WAL needs the file to itself: a run started while another (an older mlpsych) held the network
    cache open in WAL mode stopped with "database is locked: free space there or make it writable"."""
    folder = tmp_path / "cache"
    ResultCache(folder).close()
    with closing(sqlite3.connect(folder / "results.sqlite")) as other:
        other.execute("SELECT COUNT(*) FROM results").fetchone()
        monkeypatch.setattr(cache_module, "file_system_type", lambda path: "nfs4", raising=False)
        shared = ResultCache(folder)
        shared.put("k", [1])
        assert shared.get("k") == [1]
        shared.close()


def test_a_cache_file_a_colleague_made_that_this_user_may_not_write_says_whose_to_fix(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """$MLPSYCH_CACHE a group folder, the cache file made by a colleague under umask 022: the run stopped at the
    first result it stored, after loading the models and reading a paper, with "attempt to write a readonly
    database: free space there or make it writable". It now stops when the cache is opened, saying whose it is
    to fix. (Simulated with SQLite's read-only mode: tests may run as root, who may write anything.)"""
    from mlpsych.errors import CacheError

    folder = tmp_path / "cache"
    ResultCache(folder).close()
    connect = sqlite3.connect
    monkeypatch.setattr(cache_module.sqlite3, "connect",
                        lambda path, **options: connect(f"file:{path}?mode=ro", uri=True, **options))
    with pytest.raises(CacheError) as error:
        ResultCache(folder)
    assert str(error.value) == (
        f"the result cache {folder / 'results.sqlite'} cannot be opened (attempt to write a readonly database): "
        "make it readable and writable for you (its owner can), or choose another cache folder (--cache or "
        "$MLPSYCH_CACHE); results stored before are kept, rerun to resume")


def test_a_cache_another_process_holds_locked_past_the_timeout_says_so(tmp_path: Path) -> None:
    """A write waited out the busy timeout behind another process's lock: the run stopped saying "free space there
    or make it writable", which was neither the fault nor the fix."""
    from mlpsych.errors import CacheError

    folder = tmp_path / "cache"
    cache = ResultCache(folder)
    cache._conn.execute("PRAGMA busy_timeout = 100")  # the run's 60 s, shortened
    with closing(sqlite3.connect(folder / "results.sqlite", isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(CacheError) as error:
            cache.put("k", [1])
        other.execute("ROLLBACK")
    cache.close()
    assert "cannot be written (database is locked): another process (a run?) is using it: try again once it is " \
           "done, or choose another cache folder" in str(error.value)
