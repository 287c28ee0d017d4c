"""Reports written whole: a failed write is one line and leaves the report already there as it was."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from mlpsych.errors import OutputError
from mlpsych.files import write_whole


def test_a_report_is_written_with_its_folder(tmp_path: Path) -> None:
    write_whole(tmp_path / "new" / "eval.md", "| F1 |\n")
    assert (tmp_path / "new" / "eval.md").read_text(encoding="utf-8") == "| F1 |\n"


def test_a_failed_write_keeps_the_report_there_and_no_work_file(tmp_path: Path, monkeypatch) -> None:
    """`eval --out` and `agree --out` wrote in place: a full disk left half a report where the last one was."""
    report = tmp_path / "agree.md"
    report.write_text("the last report\n", encoding="utf-8")

    def full_disk(self: Path, *args, **kwargs) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OutputError, match=r"agree.md cannot be written \(No space left on device\)$"):
        write_whole(report, "the new report\n")
    monkeypatch.undo()
    assert report.read_text(encoding="utf-8") == "the last report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["agree.md"]


def test_a_folder_where_the_report_goes_is_one_line_not_a_bug(tmp_path: Path) -> None:
    (tmp_path / "eval.csv").mkdir()
    with pytest.raises(OutputError, match=r"eval.csv cannot be written \("):
        write_whole(tmp_path / "eval.csv", "question,f1\n")
    assert [p.name for p in tmp_path.iterdir()] == ["eval.csv"]
