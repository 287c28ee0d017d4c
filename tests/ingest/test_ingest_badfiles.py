"""Bad input: every broken file gets a clear status and the good papers next to it still load."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from mlpsych.errors import BackendUnavailable, InputError, UnknownChoice
from mlpsych.dev.synth import SynthPaper, image_only_pdf, render_pdf
from mlpsych.ingest import load_documents
from mlpsych.ingest.formats import TRUNCATED_PDF

GOOD_TEXT = "A short paper. We used random forests to predict well-being in adolescents."


@pytest.fixture(autouse=True)
def _no_tika(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKA_APP_JAR", raising=False)
    monkeypatch.delenv("TIKA_SERVER_ENDPOINT", raising=False)


# Garbage between a PDF's header and its end-of-file marker: whole, but unreadable.
CORRUPT_PDF_BYTES = b"%PDF-1.7\n" + bytes(range(256)) * 40 + b"\nstartxref\n0\n%%EOF\n"


def cut_short(source: Path, target: Path, keep: float = 2 / 3) -> Path:
    """The first part of a PDF, as a download broken off leaves it."""
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * keep)])
    return target


def small_paper(title: str) -> SynthPaper:
    return SynthPaper(title, [f"{title} paragraph {k}. " + GOOD_TEXT * 3 for k in range(4)])


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("zoo")
    render_pdf(small_paper("Good"), folder / "good.pdf")
    render_pdf(small_paper("Spaced"), folder / "Müller et al 2020 (final).pdf")
    render_pdf(small_paper("Locked"), folder / "encrypted.pdf", encrypt_password="secret")
    (folder / "corrupt.pdf").write_bytes(CORRUPT_PDF_BYTES)
    (folder / "zero.pdf").write_bytes(b"")
    image_only_pdf(folder / "scanned.pdf")
    (folder / "notes.pdf").write_text("hello world, I am plain text", encoding="utf-8")
    png = io.BytesIO()
    from PIL import Image

    Image.new("RGB", (4, 4)).save(png, format="PNG")
    (folder / "picture.pdf").write_bytes(png.getvalue())
    (folder / "paper.txt").write_text(GOOD_TEXT, encoding="utf-8")
    (folder / "paper.md").write_text(GOOD_TEXT + " Markdown copy.", encoding="utf-8")
    (folder / "latin1.txt").write_bytes("Caf\xe9 study of na\xefve participants.".encode("cp1252"))
    (folder / ".hidden.pdf").write_bytes(b"%PDF-1.4 junk")
    (folder / "figure.png").write_bytes(png.getvalue())
    (folder / "README.md").write_text("about this folder", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def zoo_docs(zoo: Path) -> dict[str, object]:
    documents = load_documents(zoo, pdf_backend="pdfium", progress=False)
    return {d.id: d for d in documents}


def test_zoo_ids_skip_hidden_readme_and_unsupported(zoo_docs) -> None:
    assert sorted(zoo_docs) == sorted(
        ["good", "Müller_et_al_2020_final", "encrypted", "corrupt", "zero", "scanned", "notes", "picture",
         "paper", "paper-2", "latin1"]
    )


@pytest.mark.parametrize(
    ("doc_id", "status"),
    [
        ("encrypted", "encrypted PDF: password required"),
        ("zero", "empty file"),
        ("scanned", "no text layer (scanned image?): run OCR first, e.g. ocrmypdf"),
        ("notes", "not a PDF (it is plain text: a text file saved with a .pdf name?)"),
        ("picture", "not a PDF (it is a PNG image)"),
    ],
)
def test_zoo_statuses(zoo_docs, doc_id: str, status: str) -> None:
    document = zoo_docs[doc_id]
    assert document.status == status
    assert document.text == "" and document.pages == []


def test_corrupt_pdf_gets_a_status(zoo_docs) -> None:
    assert zoo_docs["corrupt"].status.startswith("corrupt or unreadable PDF")


def test_a_pdf_cut_short_is_said_to_be_truncated(tmp_path) -> None:
    """A download broken off: the status says so and what to do, rather than a parser's "Data format error"."""
    render_pdf(small_paper("Cut"), tmp_path / "full.pdf")
    cut = cut_short(tmp_path / "full.pdf", tmp_path / "cut.pdf")
    (document,) = load_documents(cut, pdf_backend="pdfium", progress=False)
    assert document.status == TRUNCATED_PDF and document.text == ""
    padded = tmp_path / "padded.pdf"  # a whole PDF a server padded with NULs is no truncated one
    padded.write_bytes((tmp_path / "full.pdf").read_bytes() + b"\0" * 4096)
    (document,) = load_documents(padded, pdf_backend="pdfium", progress=False)
    assert document.ok and "random forests" in document.text


def test_good_files_still_load(zoo_docs) -> None:
    for doc_id in ("good", "Müller_et_al_2020_final", "paper", "paper-2"):
        document = zoo_docs[doc_id]
        assert document.ok, (doc_id, document.status)
        assert "random forests" in document.text
    assert zoo_docs["Müller_et_al_2020_final"].source_path.endswith("Müller et al 2020 (final).pdf")
    assert zoo_docs["paper"].text.endswith("Markdown copy.")  # sorted: paper.md before paper.txt


def test_non_utf8_text_is_decoded_and_reported(zoo_docs) -> None:
    document = zoo_docs["latin1"]
    assert document.ok and document.text == "Café study of naïve participants."
    assert "not valid UTF-8" in document.meta["warnings"][0]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_a_text_file_in_utf16_with_or_without_a_bom_is_read(tmp_path: Path, encoding: str) -> None:
    """R's ``fileEncoding = "UTF-16LE"`` and .NET save UTF-16 without a BOM: it was refused as binary content."""
    text = "Über die Studie. " + GOOD_TEXT + " Wir verwendeten 500 Bäume."
    path = tmp_path / "paper.txt"
    path.write_bytes(text.encode(encoding))
    (document,) = load_documents(path, progress=False)
    assert document.ok, document.status
    assert document.text == text and "warnings" not in document.meta


def test_a_link_whose_paper_is_gone_is_said_to_be_one(tmp_path: Path) -> None:
    """A link left behind when a linked folder moved is listed like a paper: its status said only "cannot read file:
    No such file or directory", of a file the researcher sees in the folder."""
    (tmp_path / "good.txt").write_text(GOOD_TEXT, encoding="utf-8")
    (tmp_path / "linked.pdf").symlink_to(tmp_path / "moved" / "paper.pdf")
    (tmp_path / "linked.txt").symlink_to(tmp_path / "moved" / "paper.txt")
    docs = {d.id: d for d in load_documents(tmp_path, pdf_backend="pdfium", progress=False)}
    assert docs["good"].ok
    for doc_id, target in (("linked", "paper.pdf"), ("linked-2", "paper.txt")):
        status = docs[doc_id].status
        assert status.startswith("a link to a file that is not there (") and target in status, status
        assert "copy the paper into the folder" in status


@pytest.mark.parametrize("page", [
    b"<!DOCTYPE html>\n<html><head><title>Access denied</title></head><body>Sign in</body></html>",
    b"\xef\xbb\xbf<!DOCTYPE html><html><body>Sign in</body></html>",
    b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN">\n'
    b'<html xmlns="http://www.w3.org/1999/xhtml"><body>Sign in</body></html>',
    b"\n<!-- saved from url=(0042)https://doi.org/10.1000/xyz -->\n<html><body>Purchase this article</body></html>",
])
def test_a_journals_web_page_saved_as_pdf_is_said_to_be_one(tmp_path: Path, page: bytes) -> None:
    """A paywall page saved under the paper's name: one with an XML prolog, a BOM or a comment first was called
    "plain text: a text file saved with a .pdf name?"."""
    (tmp_path / "smith2020.pdf").write_bytes(page)
    (document,) = load_documents(tmp_path / "smith2020.pdf", pdf_backend="pdfium", progress=False)
    assert document.status == "not a PDF (it is HTML: a web page saved with a .pdf name?)"


def test_missing_and_empty_folders_raise_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or folder"):
        load_documents(tmp_path / "nope", progress=False)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "image.png").write_bytes(b"x")
    with pytest.raises(InputError, match="no papers found in"):
        load_documents(tmp_path / "empty", progress=False)


def test_unknown_backend_and_missing_tika(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text(GOOD_TEXT)
    with pytest.raises(UnknownChoice, match="unknown PDF backend 'grobid'"):
        load_documents(tmp_path, pdf_backend="grobid", progress=False)
    monkeypatch.setenv("TIKA_APP_JAR", str(tmp_path / "missing.jar"))
    with pytest.raises(BackendUnavailable, match="the tika PDF backend cannot be used: TIKA_APP_JAR points to a missing file"):
        load_documents(tmp_path, pdf_backend="tika", progress=False)
    (tmp_path / "b.docx").write_bytes(b"PK\x03\x04 not really")
    docs = {d.id: d for d in load_documents(tmp_path, pdf_backend="auto", progress=False)}
    assert docs["a"].ok
    assert docs["b"].status.startswith("TIKA_APP_JAR points to a missing file")


def test_explicit_file_list_and_duplicate_stems(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    (tmp_path / "x" / "paper.txt").write_text("First paper text.")
    (tmp_path / "y" / "paper.txt").write_text("Second paper text.")
    docs = load_documents([tmp_path / "x" / "paper.txt", tmp_path / "y" / "paper.txt"], progress=False)
    assert [d.id for d in docs] == ["paper", "paper-2"]
    assert [d.text for d in docs] == ["First paper text.", "Second paper text."]


def test_long_pdf_loads_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from reportlab.pdfgen import canvas

    path = tmp_path / "book.pdf"
    pdf = canvas.Canvas(str(path))
    for page in range(500):
        pdf.drawString(72, 700, f"Chapter text on page {page + 1} of the long book about groups.")
        pdf.showPage()
    pdf.save()
    with caplog.at_level(logging.WARNING):
        (document,) = load_documents(path, pdf_backend="pdfium", progress=False)
    assert document.ok and len(document.pages) == 500
    assert document.page_at(document.text.index("on page 377 of")) == 377
    assert "very long document (500 pages)" in document.meta["warnings"][0]
    assert "book.pdf: very long document (500 pages)" in caplog.text  # said while reading, not only kept
