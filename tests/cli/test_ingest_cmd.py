"""`mlpsych ingest` as a researcher runs it on a folder of papers: where it writes, and what it reads."""

from __future__ import annotations

import json
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


def test_ingest_run_again_in_the_papers_folder_does_not_read_its_own_output(papers, capsys) -> None:
    """`mlpsych ingest .` writes texts.jsonl into the folder it reads; run again (after adding a paper, or with
    other cleaning), it read that file back as papers and wrote every paper twice, the second as "paper-2"."""
    out = papers / "texts.jsonl"
    assert main(["ingest", str(papers), "--out", str(out), "--quiet"]) == 0
    first = [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert main(["ingest", str(papers), "--out", str(out), "--quiet"]) == 0
    again = [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert again == first == sorted(p.stem for p in papers.glob("*.txt"))
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {len(first)} document(s) to {out}"


def test_ingest_of_its_own_output_named_as_input_still_reads_it(papers, tmp_path) -> None:
    """Named itself (re-cleaned in place, or hand-corrected and checked), the output is read as any other input."""
    out = tmp_path / "texts.jsonl"
    assert main(["ingest", str(papers), "--out", str(out), "--no-progress"]) == 0  # as `mlpsych run` spells it
    before = out.read_text(encoding="utf-8")
    assert main(["ingest", str(out), "--out", str(out), "--quiet"]) == 0
    assert out.read_text(encoding="utf-8") == before


def test_papers_read_with_notes_are_counted_in_the_last_line(papers, tmp_path, capsys) -> None:
    """The note that a PDF had pages without text went into the JSONL's meta alone: the last line said all was
    written as if every page had been read."""
    from mlpsych.dev.synth import pdf_with_a_page_without_text

    pdf_with_a_page_without_text(papers / "scanned-table.pdf")
    out = tmp_path / "texts.jsonl"
    assert main(["ingest", str(papers), "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out.strip().endswith("; 1 read with notes (pages without text, ...: said above, and in "
                                                    "each one's meta)")
    records = {r["id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert records["scanned-table"]["meta"]["warnings"] == ["pages without text (images? OCR them to include them): 2"]
