"""JSONL and MLPsych text.json round trips, ids, and the `mlpsych ingest` command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mlpsych.errors import UserError
from mlpsych.cli.ingest_cmd import add_ingest_options, ingest_from_args, run
from mlpsych.dev.synth import SynthPaper, render_pdf
from mlpsych.documents import Document
from mlpsych.ingest import load_documents
from mlpsych.ingest.formats import sanitize_id


@pytest.fixture(autouse=True)
def _no_tika(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKA_APP_JAR", raising=False)
    monkeypatch.delenv("TIKA_SERVER_ENDPOINT", raising=False)


def ingest_args(papers: list[Path], out: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("papers", nargs="+")
    parser.add_argument("--out")
    parser.add_argument("--quiet", action="store_true")
    add_ingest_options(parser)
    return parser.parse_args([*map(str, papers), "--out", str(out), "--quiet", *extra])


def test_sanitize_id() -> None:
    assert sanitize_id("Müller et al 2020 (final)") == "Müller_et_al_2020_final"
    assert sanitize_id("=cmd|' /C calc'!A0") == "cmd_C_calc_A0"
    assert sanitize_id("...") == "doc"


def test_text_json_double_encoded(tmp_path: Path) -> None:
    texts = {"577240211": "First paper about groups.", "577240225": "Second paper with (SVM) (Smith, 2019)."}
    path = tmp_path / "text.json"
    path.write_text(json.dumps(json.dumps(texts)), encoding="utf-8")
    documents = load_documents(path, progress=False)
    assert [(d.id, d.text) for d in documents] == list(texts.items())  # taken as is: already cleaned
    assert all(d.meta["backend"] == "text.json" and d.page_at(0) is None for d in documents)  # no pages in it


def test_unrelated_json_in_folder_is_skipped_but_explicit_one_reported(tmp_path: Path) -> None:
    (tmp_path / "answers.json").write_text(json.dumps({"q1": {"a": []}}))
    (tmp_path / "paper.txt").write_text("Text of the paper.")
    assert [d.id for d in load_documents(tmp_path, progress=False)] == ["paper"]
    (document,) = load_documents(tmp_path / "answers.json", progress=False)
    assert document.status.startswith("unrecognized JSON")


def test_a_runs_answers_in_the_papers_folder_are_not_read_as_papers(tmp_path: Path) -> None:
    """``mlpsych run papers --out papers/results.jsonl`` then a rerun: every answer line became a paper with the
    problem "bad JSONL line N: expected an object with an 'id'" (named explicitly, the file is still reported)."""
    (tmp_path / "paper.txt").write_text("Text of the paper.")
    row = {"paper_id": "paper", "source_file": "paper.txt", "question_id": "q1", "answer": "random forest"}
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    assert [d.id for d in load_documents(tmp_path, progress=False)] == ["paper"]
    named = load_documents(tmp_path / "results.jsonl", progress=False)
    assert [d.status for d in named] == ["bad JSONL line 1: expected an object with an 'id'",
                                         "bad JSONL line 2: expected an object with an 'id'"]


def test_ingests_texts_jsonl_beside_the_papers_does_not_read_them_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """`mlpsych ingest .` then `mlpsych run .` read every paper twice: from its file and from texts.jsonl (as
    "a-2"). The folder's files are read; a paper the JSONL holds from elsewhere is kept; named, the JSONL is read."""
    (tmp_path / "a.txt").write_text("Text of paper a.")
    (tmp_path / "b.txt").write_text("Text of paper b.")
    monkeypatch.chdir(tmp_path)
    assert run(ingest_args([Path(".")], Path("texts.jsonl"))) == 0  # source paths relative to the folder
    with (tmp_path / "texts.jsonl").open("a", encoding="utf-8") as handle:  # and one paper from elsewhere
        handle.write(json.dumps(Document("c", "Text of paper c.", source_path="/elsewhere/c.pdf").to_dict()) + "\n")
    monkeypatch.chdir(tmp_path.parent)  # a run from another folder finds the same files
    caplog.set_level("WARNING", logger="mlpsych.ingest")
    documents = load_documents(tmp_path, progress=False)
    assert [(d.id, Path(d.source_path or "").name) for d in documents] == [("a", "a.txt"), ("b", "b.txt"),
                                                                           ("c", "c.pdf")]
    assert documents[0].text == "Text of paper a."
    assert "texts.jsonl: 2 of its 3 papers are also files in this folder (a.txt, b.txt)" in caplog.text
    assert [d.id for d in load_documents(tmp_path / "texts.jsonl", progress=False)] == ["a", "b", "c"]


def test_cli_jsonl_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    render_pdf(SynthPaper("Round Trip", ["We used random forests (Smith, 2019) on the data. " * 20] * 6),
               papers / "trip.pdf")
    (papers / "note.txt").write_text("Plain text paper with support vector machines (SVM).")
    (papers / "empty.txt").write_text("")
    out = tmp_path / "out" / "texts.jsonl"
    assert run(ingest_args([papers], out)) == 0
    assert "wrote 3 document(s)" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["empty", "note", "trip"]
    assert rows[0]["status"] == "empty file"
    assert rows[2]["meta"]["backend"] == "pdfium" and "cleaning" in rows[2]["meta"]
    first = load_documents(papers, progress=False)
    again = load_documents(out, progress=False)
    assert [d.to_dict() for d in again] == [d.to_dict() for d in first]
    # a hand-corrected JSONL is taken as is, not cleaned again
    rows[1]["text"] = "Corrected (Smith, 2019) text."
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n", encoding="utf-8")
    again = {d.id: d for d in load_documents(out, progress=False)}
    assert again["note"].text == "Corrected (Smith, 2019) text."
    assert again["texts-line4"].status.startswith("bad JSONL line 4")


def test_cli_errors_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file or folder"):
        run(ingest_args([tmp_path / "missing"], tmp_path / "t.jsonl"))
    (tmp_path / "a.txt").write_text("Some text.")
    with pytest.raises(UserError, match="unknown cleaning step"):
        run(ingest_args([tmp_path], tmp_path / "t.jsonl", "--no-clean", "nonsense"))
    with pytest.raises(UserError, match="must end in .jsonl"):
        run(ingest_args([tmp_path], tmp_path / "t.csv"))


def test_ingest_from_args_respects_no_clean(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Bias is common (Smith et al., 2019). Models (SVM) help.")
    args = ingest_args([tmp_path], tmp_path / "t.jsonl", "--no-clean", "citations")
    (document,) = ingest_from_args(args, tmp_path)
    assert "(Smith et al., 2019)" in document.text
    assert "citations" not in document.meta["cleaning"]["steps"]
    (document,) = ingest_from_args(ingest_args([tmp_path], tmp_path / "t.jsonl"), tmp_path)
    assert document.text == "Bias is common. Models (SVM) help."
    assert isinstance(document, Document)


def test_a_text_file_gets_pages_only_from_its_form_feeds(tmp_path: Path) -> None:
    """A .txt has no pages unless form feeds mark them (pdftotext's output): its answers get no page number rather
    than a page 1 they may be nowhere near, and with form feeds the page each one is on."""
    body = "We trained random forests on the essays of the participants. " * 40
    (tmp_path / "plain.txt").write_text(body + "\n\nThe last sentence names SPSS.", encoding="utf-8")
    (tmp_path / "paged.txt").write_text(f"{body}\f{body}\fThe last sentence names SPSS.", encoding="utf-8")
    documents = {d.id: d for d in load_documents(tmp_path, progress=False)}
    plain, paged = documents["plain"], documents["paged"]
    assert plain.ok and plain.pages == [] and plain.page_at(plain.text.index("SPSS")) is None
    assert "n_pages" not in plain.meta
    assert paged.page_at(paged.text.index("SPSS")) == 3 == paged.meta["n_pages"]
    again = load_documents(tmp_path / "plain.txt", progress=False)[0]
    assert Document.from_dict(again.to_dict()).page_at(0) is None  # and so after `mlpsych ingest` too


def test_a_paper_downloaded_twice_is_read_once(tmp_path: Path) -> None:
    """"paper (1).pdf" beside "paper.pdf", or a link to a paper of the folder, was read as a second paper and counted
    twice in the frequencies. Files that are only alike (another format, one byte more) and empty files stay papers."""
    (tmp_path / "a.txt").write_text("We used random forests to predict dropout.")
    (tmp_path / "a (1).txt").write_text("We used random forests to predict dropout.")
    (tmp_path / "b.txt").write_text("We used random forests to predict dropout!")
    (tmp_path / "c.txt").symlink_to(tmp_path / "b.txt")
    (tmp_path / "d.txt").write_text("")
    (tmp_path / "e.txt").write_text("")
    documents = {d.id: d for d in load_documents(tmp_path, progress=False)}
    assert documents["a_1"].status == ("a copy of a.txt (the same file, byte for byte): read once, as that paper; "
                                       "remove one of the two") and not documents["a_1"].text
    assert documents["c"].status.startswith("a copy of b.txt")
    assert documents["a"].ok and documents["b"].ok
    assert documents["d"].status == documents["e"].status == "empty file"


def test_two_ingests_writing_one_out_at_once_each_write_their_own_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `mlpsych ingest --out texts.jsonl` at once shared one work file, `texts.jsonl.partial`: the second
    truncated the first's, renamed it into place while the first still wrote in it, and the first then failed with
    "No such file or directory"; the second said it wrote its papers, and the file held the first's. Each writer
    now has its own, and the one that finishes last leaves its texts whole."""
    from mlpsych.ingest import formats

    first = [Document(f"a{i}", f"Paper a{i} used random forests. " * 40) for i in range(3)]
    second = [Document("b0", "Paper b0 used R.")]
    out = tmp_path / "texts.jsonl"
    line, started = formats._line, []

    def second_ingest_meanwhile(document: Document) -> str:  # the other ingest writes out during this one's write
        if document.id == "a1" and not started:
            started.append(True)
            formats.write_jsonl(second, out)
            assert [d.id for d in formats.read_jsonl(out)] == ["b0"]
        return line(document)

    monkeypatch.setattr(formats, "_line", second_ingest_meanwhile)
    formats.write_jsonl(first, out)
    assert started and [(d.id, d.text) for d in formats.read_jsonl(out)] == [(d.id, d.text) for d in first]
    assert [p.name for p in tmp_path.iterdir()] == ["texts.jsonl"]  # no work file left
