"""`mlpsych cache info` and `mlpsych cache clear` on real cache files, and a run after a clear."""

from __future__ import annotations

import io
import shutil
import sys
import time
from pathlib import Path

import pytest
from openpyxl import load_workbook

from mlpsych.cache_admin import DAY, STAGES, stats
from mlpsych.cli import main
from mlpsych.cli.cache_cmd import day, size

from cache_entries import ENTRIES, entry_bytes, fill, keys


class Terminal(io.StringIO):
    """What a researcher types at a terminal (sys.stdin as a terminal, its answers given)."""

    def isatty(self) -> bool:
        return True


def cache_cli(*args: object) -> int:
    try:
        return main(["cache", *map(str, args)])
    except SystemExit as stop:  # argparse's refusals
        return int(stop.code)


def test_info_shows_what_a_clear_is_decided_from(tmp_path: Path, capsys) -> None:
    now = time.time()
    folder = fill(tmp_path / "cache", now=now)
    (folder / "onnx").mkdir()
    (folder / "onnx" / "model.onnx").write_bytes(b"\0" * 2500)
    assert cache_cli("info", "--cache", folder) == 0
    out = capsys.readouterr().out
    assert f"result cache: {folder / 'results.sqlite'}" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[3:8]}
    for stage in ("read", "normalize", "read-checkpoint", "unknown"):
        mine = [k for k, (s, _, _) in ENTRIES.items() if (s or "unknown") == stage]
        ages = [ENTRIES[k][1] for k in mine if ENTRIES[k][1] is not None]
        assert rows[stage] == [str(len(mine)), *size(sum(entry_bytes(k) for k in mine)).split(),
                               day(now - max(ages) * DAY), day(now - min(ages) * DAY)]
    assert rows["total"][0] == str(len(ENTRIES))
    assert "1 entry without a date (written by an older mlpsych): --older-than keeps them" in out
    assert "mlpsych cache clear --stage read-checkpoint" in out
    assert "also in the folder, not results (clear leaves them): onnx/ 2.5 kB" in out


def test_info_of_a_folder_without_a_cache_says_so_and_makes_none(tmp_path: Path, capsys) -> None:
    assert cache_cli("info", "--cache", tmp_path / "none") == 0
    assert capsys.readouterr().out == (f"no result cache in {tmp_path / 'none'} (no such folder) yet: a run stores "
                                       "its results there\n")
    assert not (tmp_path / "none").exists()
    assert cache_cli("clear", "--cache", tmp_path, "--yes") == 0
    assert capsys.readouterr().out == f"no result cache in {tmp_path}: nothing to clear\n"
    assert list(tmp_path.iterdir()) == []


def test_clear_without_yes_off_a_terminal_is_refused_in_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    folder = fill(tmp_path / "cache", now=time.time())
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # a script's input, no terminal
    assert cache_cli("clear", "--cache", folder, "--stage", "read-checkpoint") == 2
    removed = size(entry_bytes("checkpoint-old") + entry_bytes("checkpoint-new"))
    assert capsys.readouterr().err == (f"mlpsych: error: cache clear would remove 2 entries ({removed}) of stage "
                                       f"read-checkpoint from {folder}: add --yes to remove them (no terminal to ask "
                                       "on)\n")
    assert keys(folder) == set(ENTRIES)


@pytest.mark.parametrize(("answer", "left"), [("n\n", set(ENTRIES)), ("\n", set(ENTRIES)),
                                               ("y\n", set(ENTRIES) - {"checkpoint-old"})])
def test_clear_on_a_terminal_asks_first(tmp_path: Path, capsys, monkeypatch, answer: str, left: set) -> None:
    folder = fill(tmp_path / "cache", now=time.time())
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    assert cache_cli("clear", "--cache", folder, "--stage", "read-checkpoint", "--older-than", "7") == 0
    out = capsys.readouterr().out
    assert out.startswith(f"remove 1 entry ({size(entry_bytes('checkpoint-old'))}) of stage read-checkpoint, "
                          f"written before ")
    assert ("removed 1 entry" in out) == (answer == "y\n") and ("nothing removed" in out) == (answer != "y\n")
    assert keys(folder) == left


def test_clear_with_yes_removes_and_says_what_it_gave_back(tmp_path: Path, capsys) -> None:
    folder = fill(tmp_path / "cache", now=time.time())
    assert cache_cli("clear", "--cache", folder, "--stage", "read", "normalize", "--older-than", "1.5", "--yes") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("removed 3 entries (") and "of stages normalize, read, written before" in lines[0]
    assert lines[1].startswith("on disk: ") and len(lines) == 2
    assert keys(folder) == set(ENTRIES) - {"read-old", "llm-old", "llm-new"}
    assert cache_cli("clear", "--cache", folder, "--stage", "read", "--older-than", "1.5", "--yes") == 0
    assert capsys.readouterr().out.startswith("nothing to remove: no entries of stage read, written before")


@pytest.mark.parametrize(("args", "says"), [
    (["--older-than", "-2"], "mlpsych: error: --older-than -2: give a number of days, 0 or more"),
    (["--older-than", "a week"], "mlpsych cache clear: error: argument --older-than: invalid float value: 'a week'"),
    (["--stage", "checkpoint"], "mlpsych: error: --stage checkpoint: no such stage; the stages are normalize, read, "
                                "read-checkpoint, unknown"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, capsys, args: list, says: str) -> None:
    folder = fill(tmp_path / "cache")
    assert cache_cli("clear", "--cache", folder, *args, "--yes") == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and err.count("\n") == 1
    assert keys(folder) == set(ENTRIES)


@pytest.mark.parametrize("command", ["info", "clear"])
def test_a_cache_that_cannot_be_read_is_one_line_and_exit_2(tmp_path: Path, capsys, command: str) -> None:
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "results.sqlite").write_bytes(b"\x00garbage" * 512)
    (tmp_path / "a-file").write_text("x")
    for folder, says in ((tmp_path / "damaged", "(file is not a database): delete it"),
                         (tmp_path / "a-file", "is a file: give the folder a run's --cache names")):
        assert cache_cli(command, "--cache", folder, *(["--yes"] if command == "clear" else [])) == 2
        err = capsys.readouterr().err
        assert err.startswith("mlpsych: error: ") and says in err and err.count("\n") == 1


def test_clear_help_names_the_checkpoints(capsys) -> None:
    assert cache_cli("clear", "--help") == 0
    assert "mlpsych cache clear --stage read-checkpoint" in " ".join(capsys.readouterr().out.split())


def answers_and_windows(out: Path) -> tuple[list, int]:
    book = load_workbook(out)
    sheet = book["answers"]
    head = [cell.value for cell in sheet[1]]
    rows = sorted(tuple(str(row[head.index(c)]) for c in ("paper_id", "question_id", "answer", "stage", "score"))
                  for row in sheet.iter_rows(min_row=2, values_only=True))
    return rows, int(dict(book["run"].iter_rows(min_row=2, values_only=True))["windows_read"])


@pytest.mark.slow
def test_a_run_after_a_clear_reads_again_and_answers_the_same(examples_dir, tiny_questions, tmp_path) -> None:
    papers, cache = tmp_path / "papers", tmp_path / "cache"
    papers.mkdir()
    shutil.copy(sorted((examples_dir / "papers").glob("*.txt"))[0], papers)

    def run(out: str) -> tuple[list, int]:
        assert main(["run", str(papers), "--questions", str(tiny_questions), "--out", str(tmp_path / out),
                     "--cache", str(cache), "--no-progress", "--max-length", "256", "--stride", "64",
                     "--only", "q1"]) == 0  # read by two readers, its answers normalized by the LLM
        return answers_and_windows(tmp_path / out)

    first, windows = run("first.xlsx")
    written = {row.stage for row in stats(cache).stages}
    assert {"read", "normalize"} <= written <= set(STAGES)  # every stage a run writes is described
    assert windows > 0 and run("cached.xlsx") == (first, 0)
    assert cache_cli("clear", "--cache", cache, "--stage", "read", "--yes") == 0
    assert "read" not in {row.stage for row in stats(cache).stages}
    assert run("after-read-cleared.xlsx") == (first, windows)  # read again, the same answers
    assert cache_cli("clear", "--cache", cache, "--yes") == 0
    assert stats(cache).total.entries == 0
    assert run("after-all-cleared.xlsx") == (first, windows)
