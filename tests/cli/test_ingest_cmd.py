"""`mlpsych ingest` as a researcher runs it on a folder of papers: where it writes, and what it reads."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mlpsych.cli import main


@pytest.fixture
def papers(examples_dir: Path, tmp_path: Path) -> Path:
    """A copy of the example papers, in a folder of the test's own."""
    folder = tmp_path / "papers"
    folder.mkdir()
    for path in sorted((examples_dir / "papers").glob("*.txt")):
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


def test_an_out_that_is_a_folder_is_refused_before_any_paper_is_read(papers, tmp_path, capsys, caplog) -> None:
    """`--out texts.jsonl` naming a folder was found only at the write, after every paper was read (an hour of Tika
    on a large corpus, lost)."""
    out = tmp_path / "texts.jsonl"
    out.mkdir()
    with caplog.at_level(logging.INFO, logger="mlpsych.ingest"):
        assert main(["ingest", str(papers), "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"mlpsych: error: --out {out} is a folder: give a file name in it, such as {out / 'results.jsonl'}"]
    assert not [r for r in caplog.records if r.name == "mlpsych.ingest"]  # no paper was read
