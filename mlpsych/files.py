"""Files written whole, and shared: what a writer of ours makes lies in a work file or folder of its own until it
is renamed into place, gets the permissions the umask gives (a lab shares cache, reader and model folders), and
what a killed writer left goes with a later writer. One place for these rules.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)


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


def first_free(named: Callable[[int], Path]) -> Path:
    """``named(n)`` for the first n from 1 that no file has: a copy kept aside, or a new file, never replaces an
    earlier one."""
    n = 1
    while (path := named(n)).exists():
        n += 1
    return path


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


def write_whole(path: Path, text: str) -> None:
    """``text`` written whole into ``path``, its folder made: what a command writes at its end (`eval --out` and
    `agree --out` reports, a calibrator). A file that cannot be written is one line (``OutputError``), not a bug,
    and a file already there stays as it was (reports were written in place: a failed write left half of one)."""
    from mlpsych.errors import cannot_write

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with written_whole(path) as partial:
            partial.write_text(text, encoding="utf-8")
    except OSError as error:
        raise cannot_write(path, error) from None


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
