"""A cache or an output that cannot be written (a full disk, a damaged file, a file where a folder goes): one
clear line that says what to do, and nothing already finished is lost."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from mlpsych import export
from mlpsych.cache import ResultCache
from mlpsych.cli import main
from mlpsych.errors import CacheError
from mlpsych.export import temporary_path
from mlpsych.ingest import load_documents
from mlpsych.pipeline import Pipeline
from mlpsych.questions import load_question_set

from .conftest import cache_rows, cli_args, integrity, run_settings


def filling_cache(folder, room_pages: int) -> ResultCache:
    """A real cache whose SQLite file may grow by ``room_pages`` pages only: SQLite then says "database or disk
    is full", as it does on a full disk."""
    cache = ResultCache(folder)
    pages = cache._conn.execute("PRAGMA page_count").fetchone()[0]
    cache._conn.execute(f"PRAGMA max_page_count = {pages + room_pages}")
    return cache


@pytest.mark.slow
def test_a_cache_that_fills_up_stops_the_run_and_keeps_what_it_stored(papers, fast_questions, tmp_path) -> None:
    """Each paper got the status `caching ...: OperationalError: database or disk is full` and lost the answers
    just computed; the run went on to write a sheet of failed papers."""
    cache = filling_cache(tmp_path / "cache", room_pages=4)
    pipeline = Pipeline(load_question_set(fast_questions), run_settings(), cache, progress=False)
    with pytest.raises(CacheError) as caught:
        pipeline.run(load_documents(papers, progress=False))
    cache.close()
    message = str(caught.value)
    assert "database or disk is full" in message and str(tmp_path / "cache") in message
    assert "--cache" in message and "rerun to resume" in message
    assert cache_rows(tmp_path / "cache") and integrity(tmp_path / "cache") == "ok"  # what was stored is kept


@pytest.mark.parametrize("damage", ["a file", "not a database"])
def test_a_cache_folder_that_cannot_be_used_is_one_line(damage, papers, fast_questions, tmp_path, capsys) -> None:
    """A --cache that names a file, or a cache file that is not SQLite, ended the run with "this is a bug"."""
    cache = tmp_path / "cache"
    if damage == "a file":
        cache.write_text("notes\n", encoding="utf-8")
    else:
        cache.mkdir()
        (cache / "results.sqlite").write_bytes(b"\x00garbage" * 4096)
    assert main(cli_args(papers, fast_questions, tmp_path / "out.xlsx", cache)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mlpsych: error: the result cache {cache / 'results.sqlite'}"), err
    assert ("delete it" in err[0]) == (damage == "not a database")
    assert not (tmp_path / "out.xlsx").exists()


def test_a_full_cache_is_a_cache_error_and_keeps_its_rows(tmp_path) -> None:
    """SQLite's own "full" error (what a full disk gives) is a CacheError, not an OperationalError."""
    cache = filling_cache(tmp_path, room_pages=1)
    with pytest.raises(CacheError, match="database or disk is full"):
        for i in range(50):
            cache.put(str(i), "x" * 2000)
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == len(cache)
    cache.close()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux), a device that is always full")
def test_a_full_disk_at_the_write_keeps_the_sheet_there_and_says_so(papers, fast_questions, reference, tmp_path,
                                                                     capsys, monkeypatch) -> None:
    """The disk filled while results.xlsx was written: "this is a bug", a ZipFile traceback under it, and the half
    written temporary file left behind (taking the space)."""
    out = tmp_path / "results.xlsx"
    shutil.copy(reference["xlsx"], out)
    good = out.read_bytes()
    full = temporary_path(out)  # the write goes to a device that answers "no space left"
    full.unlink()
    full.symlink_to("/dev/full")
    monkeypatch.setattr(export, "temporary_path", lambda path: full)
    assert main(cli_args(papers, fast_questions, out, reference["cache"])) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"mlpsych: error: --out {out} cannot be written (No space left on device); every answer is kept in the "
        "cache: rerun once it can be written (or with another --out), and nothing is computed again"]
    assert out.read_bytes() == good  # the sheet already there is left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.xlsx"]  # no half file left


def test_an_out_that_is_a_folder_is_refused_before_any_paper_is_read(papers, fast_questions, tmp_path,
                                                                     capsys) -> None:
    """A folder named results.xlsx was found only at the write, after the whole run: "this is a bug"."""
    out = tmp_path / "results.xlsx"
    out.mkdir()
    assert main(cli_args(papers, fast_questions, out, tmp_path / "cache")) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"mlpsych: error: --out {out} is a folder: give a file name in it, such as {out / 'results.xlsx'}"]
    assert not (tmp_path / "cache").exists()  # nothing was read
