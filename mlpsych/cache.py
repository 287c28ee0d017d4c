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
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

from mlpsych.errors import CacheError, one_line
from mlpsych.hub import cached_config

log = logging.getLogger(__name__)

SCHEMA = "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, stage TEXT, value TEXT NOT NULL, created REAL)"


def default_cache_dir() -> Path:
    """``$MLPSYCH_CACHE`` if set, else the per-user cache folder of the platform."""
    configured = os.environ.get("MLPSYCH_CACHE")
    return Path(configured) if configured else Path(user_cache_dir("mlpsych"))


def make_key(**parts: Any) -> str:
    """A stable hash of everything that determines a result."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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


# A work file or folder of ours unchanged for this long is a killed process's (a SIGKILL or a power cut skips its
# clean-up; writing the largest sheet takes seconds, exporting the largest reader minutes): the next writer beside it
# removes it.
LEFTOVER_SECONDS = 3600


def remove_leftovers(entries: Iterable[Path]) -> None:
    """Remove the ``entries`` (temporary files or work folders a writer of ours made) in which nothing changed for
    ``LEFTOVER_SECONDS``: a younger one may be another process's work under way, and is left to it. A folder's last
    change is its own or any of its files'; one gone meanwhile (its process finished) is skipped."""
    now = time.time()
    for entry in entries:
        folder = entry.is_dir() and not entry.is_symlink()
        try:
            times = [entry.lstat().st_mtime] + ([f.lstat().st_mtime for f in entry.iterdir()] if folder else [])
            changed = max(times)
            if now - changed < LEFTOVER_SECONDS:
                continue
            if folder:
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:  # gone meanwhile, or not ours to remove
            continue
        log.debug("removed %s, left by a process that stopped %.0f hours ago", entry, (now - changed) / 3600)


def temporary_path(path: Path) -> Path:
    """A new, empty file where a writer (:func:`written_whole`, ``mlpsych.export.write_result``) writes before
    renaming: hidden, beside the output (a rename within one folder is atomic), its name this writer's own, so two
    runs writing one ``--out`` at once never write into each other's file. Made with the umask's permissions, as
    the output was (``mkstemp`` makes it private, and the rename gave the sheet to its owner only)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp{path.suffix}")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # never a file (or link) already there
    return tmp


def remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary files of ``path`` that killed writes left (a SIGKILL or a power cut skips the
    writer's clean-up), as :func:`remove_leftovers` rules: a younger one may be another run's write of the same
    output under way. An older mlpsych's one name (no token) goes too."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(?:[0-9a-f]+\.)?tmp{re.escape(path.suffix)}")
    try:
        entries = list(path.parent.iterdir())
    except OSError:  # a folder one may write in but not list: a clean-up never stops the write
        return
    remove_leftovers(e for e in entries if pattern.fullmatch(e.name) and (e.is_symlink() or not e.is_dir()))


def work_folder(parent: Path, prefix: str) -> Path:
    """A new folder of this process's own in ``parent`` (``tempfile.mkdtemp``'s name), made with the umask's
    permissions: what is made in it is renamed into place whole, and mkdtemp's folder is its owner's only (0700), so
    an ONNX export or a tiny model renamed into a shared folder could not be read by the colleagues sharing it."""
    while True:
        folder = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            folder.mkdir(0o777)
            return folder
        except FileExistsError:
            continue


def umask() -> int:
    """This process's umask, from /proc on Linux (``os.umask`` reads it only by setting it, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def readable_as_new(files: Iterable[Path]) -> None:
    """Give ``files`` the permissions the umask gives a new file: safetensors writes weights for their owner only
    (0600), so a reader adapted into a shared folder, or the tiny models, could not be loaded by the colleagues
    sharing it (transformers said "No such file or directory")."""
    mode = 0o666 & ~umask()
    for file in files:
        os.chmod(file, mode)


@contextmanager
def written_whole(path: Path) -> Iterator[Path]:
    """A temporary file of this writer's own beside ``path`` to write in, renamed onto ``path`` when the block ends
    and removed when it fails: no reader sees half a file, and two processes writing ``path`` at once each write
    their own (with one shared work name, the second truncated the first's file, the first renamed the second's
    half-written file into place and the second failed with "No such file or directory")."""
    remove_stale_temporaries(path)
    tmp = temporary_path(path)
    try:
        yield tmp
        tmp.replace(path)
    finally:  # after the rename there is none
        tmp.unlink(missing_ok=True)


@contextmanager
def cache_faults(path: Path, doing: str, what: str = "the result cache") -> Iterator[None]:
    """A cache that cannot be used (no room, a folder that takes no file, a damaged file) as one ``CacheError``
    saying what to do: caught per paper, a full disk made every paper's status an SQLite error and dropped the
    answers it had just computed. ``what`` names the cached thing (an ONNX export is kept there too)."""
    try:
        yield
    except (OSError, sqlite3.Error) as error:
        reason = (error.strerror if isinstance(error, OSError) else None) or one_line(error).split(": ", 1)[-1]
        damaged = isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError)
        # a colleague's file in a shared cache folder, made under a umask that leaves it theirs to write
        denied = isinstance(error, PermissionError) or "readonly database" in str(error)
        fix = ("delete it (its results are computed again)" if damaged
               else "make it readable and writable for you (its owner can)" if denied
               else "free space there or make it writable")
        raise CacheError(f"{what} {path} cannot be {doing} ({reason}): {fix}, or choose another cache "
                         f"folder (--cache or $MLPSYCH_CACHE); results stored before are kept, rerun to resume") from None


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


class ResultCache:
    """A small key-value store of JSON results. ``hits``/``misses`` are counted for the run sheet and tests."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self.directory = Path(directory) if directory else default_cache_dir()
        self.path = self.directory / "results.sqlite"
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

    def get(self, key: str) -> Any | None:
        with self._lock, cache_faults(self.path, "read"):
            row = self._conn.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, value: Any, stage: str = "") -> None:
        payload = json.dumps(value, ensure_ascii=False)
        with self._lock, cache_faults(self.path, "written"):
            self._conn.execute(
                "INSERT OR REPLACE INTO results (key, stage, value, created) VALUES (?, ?, ?, ?)",
                (key, stage, payload, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
