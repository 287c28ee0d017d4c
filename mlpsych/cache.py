"""Results on disk, keyed by (document hash, question, model, settings): reruns recompute only what changed.

SQLite in WAL mode: each finished unit of work is committed at once (a crash or Ctrl-C loses at most the unit
in progress), and two runs sharing a cache do not corrupt it. On a network file system (an NFS home folder, a
cluster's Lustre or GPFS), where WAL does not work, a rollback journal. Values are JSON, never pickle.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

from mlpsych.errors import CacheError, one_line
from mlpsych.hub import cached_config

log = logging.getLogger(__name__)

CACHE_FILE = "results.sqlite"  # in the cache folder, beside what else is kept there (ONNX exports)
# What each entry is (its ``stage``), named once: the runs write them, `mlpsych cache` counts and clears by them.
READ_STAGE = "read"
NORMALIZE_STAGE = "normalize"
CHECKPOINT_STAGE = "read-checkpoint"
SCHEMA = "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, stage TEXT, value TEXT NOT NULL, created REAL)"


def default_cache_dir() -> Path:
    """``$MLPSYCH_CACHE`` if set, else the per-user cache folder of the platform."""
    configured = os.environ.get("MLPSYCH_CACHE")
    return Path(configured) if configured else Path(user_cache_dir("mlpsych"))


def make_key(**parts: Any) -> str:
    """A stable hash of everything that determines a result."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def library_versions() -> dict[str, str]:
    """The versions of the libraries that turn a model's files into its outputs (tokenization, kernels, decoding):
    an upgrade can move answers, so a result cached under other versions is made again, and the versions a run
    sheet records are those that made its answers."""
    import tokenizers
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


def model_fingerprint(model_id: str) -> str:
    """A model's identity for the cache: for a local folder, its config, tokenizer, template and weight files'
    sizes and times; for a Hub id, the id and the commit of its locally cached snapshot (a model updated on the
    Hub is a new model), or the id alone before it is downloaded."""
    path = Path(model_id).expanduser()
    if not path.is_dir():
        commit = cached_commit(model_id)
        return f"{model_id}@{commit}" if commit else model_id
    parts = [model_id]
    for file in sorted(path.iterdir()):
        if file.is_file() and (file.suffix in (".json", ".safetensors", ".model", ".txt", ".jinja")):
            stat = file.stat()
            parts.append(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def cached_commit(repo_id: str) -> str | None:
    """The commit of the Hub repo that loading ``repo_id`` would use, from the local Hugging Face cache only (no
    network): the name of the snapshot folder its cached config.json lies in."""
    config = cached_config(repo_id)
    return config.parent.name if config else None


@dataclass(frozen=True)
class Fault:
    """Why the cache file cannot be used, in the system's words, and what fixes it."""

    reason: str
    fix: str


def fault_of(error: OSError | sqlite3.Error) -> Fault:
    """What went wrong with the cache file and what to do: damaged (delete it), this user's to read only (its owner
    can fix it), held by another process past the busy timeout (wait for it), else no room or no write."""
    reason = (error.strerror if isinstance(error, OSError) else None) or one_line(error).split(": ", 1)[-1]
    damaged = isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError)
    # a colleague's file in a shared cache folder, made under a umask that leaves it theirs to write
    denied = isinstance(error, PermissionError) or "readonly database" in str(error)
    locked = "database is locked" in str(error)
    fix = ("delete it (its results are computed again)" if damaged
           else "make it readable and writable for you (its owner can)" if denied
           else "another process (a run?) is using it: try again once it is done" if locked
           else "free space there or make it writable")
    return Fault(reason, fix)


# What a run's cache fault ends with: how to go on (a cache cleared by `mlpsych cache clear` says otherwise).
RESUME = (", or choose another cache folder (--cache or $MLPSYCH_CACHE); results stored before are kept, rerun to "
          "resume")


@contextmanager
def cache_faults(path: Path, doing: str, what: str = "the result cache", then: str = RESUME) -> Iterator[None]:
    """A cache that cannot be used (no room, a folder that takes no file, a damaged file) as one ``CacheError``
    saying what to do: caught per paper, a full disk made every paper's status an SQLite error and dropped the
    answers it had just computed. ``what`` names the cached thing (an ONNX export is kept there too), ``then``
    what follows the fix."""
    try:
        yield
    except (OSError, sqlite3.Error) as error:
        fault = fault_of(error)
        raise CacheError(f"{what} {path} cannot be {doing} ({fault.reason}): {fault.fix}{then}") from None


# File systems that processes on several machines may share, where SQLite's WAL mode does not work: its index is
# shared memory, which a process on another machine does not see (https://www.sqlite.org/wal.html), so runs on two
# cluster nodes with one NFS home folder could damage the cache. A rollback journal needs only file locks.
NETWORK_FILE_SYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "lustre", "gpfs", "beegfs", "ceph", "glusterfs",
    "panfs", "pvfs2", "orangefs", "ocfs2", "gfs2", "fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "fuse.cephfs",
    "fuse.gcsfuse", "fuse.s3fs", "fuse.rclone", "fuse.juicefs",
})
_SAID_NETWORK: set[Path] = set()  # the caches said to be on one, once a process


def file_system_type(path: Path, mounts: Path = Path("/proc/mounts")) -> str | None:
    """The type of the file system ``path`` lies on (``nfs4``, ``ext4``), from the mount table: the mount point
    that holds its real path most closely (``os.statvfs`` does not say the type). None where there is no table."""
    try:
        table = mounts.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:  # not Linux
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for line in table:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])  # "\040" is a space
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


@dataclass(frozen=True)
class Entry:
    """A stored result and its stage (what it is: ``READ_STAGE``, ...; empty for an older version's)."""

    value: Any
    stage: str


class ResultCache:
    """A small key-value store of JSON results. ``hits``/``misses`` are counted for the run sheet and tests."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self.directory = Path(directory) if directory else default_cache_dir()
        self.path = self.directory / CACHE_FILE
        self._lock = threading.Lock()
        with cache_faults(self.path, "opened"):
            self.directory.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
            self._set_journal_mode()
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(SCHEMA)
            self._check_writable()
        self.hits = 0
        self.misses = 0

    def _check_writable(self) -> None:
        """A write, rolled back: a cache this user may only read (a colleague's file in a shared folder) was found
        at the first result stored, after the models had loaded and a paper was read."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute("INSERT OR REPLACE INTO results (key, value) VALUES ('', 'null')")
        finally:
            self._conn.execute("ROLLBACK")

    def _set_journal_mode(self) -> None:
        mode = self._journal_mode()
        try:
            self._conn.execute(f"PRAGMA journal_mode={mode}")
        except sqlite3.OperationalError:  # "locked": leaving WAL needs the file to itself
            if mode == "WAL":
                raise
            log.debug("%s is open in WAL mode elsewhere (an older mlpsych): it stays so for now", self.path)

    def _journal_mode(self) -> str:
        """WAL, or a rollback journal on a network file system (there a run on another machine sharing the folder
        could damage a WAL cache; a rollback journal is slower, so the run says where a local one would go)."""
        kind = file_system_type(self.directory)
        if kind not in NETWORK_FILE_SYSTEMS:
            return "WAL"
        if self.path not in _SAID_NETWORK:  # a run opens its cache more than once
            _SAID_NETWORK.add(self.path)
            log.info("the result cache %s is on a network file system (%s), where SQLite's WAL mode does not work: "
                     "it keeps a rollback journal, slower; a cache folder on a local disk is faster (--cache or "
                     "$MLPSYCH_CACHE)", self.path, kind)
        return "DELETE"

    def get(self, key: str, counted: bool = True) -> Any | None:
        """The value stored under ``key``, or None; ``counted`` False for what is no result of the run (a read's
        checkpoint), so the run sheet's hits and misses stay those of its results."""
        found = self.entry(key, counted)
        return None if found is None else found.value

    def entry(self, key: str, counted: bool = True) -> Entry | None:
        """What is stored under ``key`` with its stage (a Ray worker sends its hits home to be stored as they
        were), or None; ``counted`` as :meth:`get`'s."""
        with self._lock, cache_faults(self.path, "read"):
            row = self._conn.execute("SELECT value, stage FROM results WHERE key = ?", (key,)).fetchone()
        if counted:
            self.hits += row is not None
            self.misses += row is None
        return None if row is None else Entry(json.loads(row[0]), row[1] or "")

    def put(self, key: str, value: Any, stage: str = "") -> None:
        payload = json.dumps(value, ensure_ascii=False)
        with self._lock, cache_faults(self.path, "written"):
            self._conn.execute(
                "INSERT OR REPLACE INTO results (key, stage, value, created) VALUES (?, ?, ?, ?)",
                (key, stage, payload, time.time()),
            )

    def delete(self, *keys: str) -> None:
        """Remove what is stored under ``keys`` (those not stored are no error)."""
        with self._lock, cache_faults(self.path, "written"):
            self._conn.executemany("DELETE FROM results WHERE key = ?", [(key,) for key in keys])

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
