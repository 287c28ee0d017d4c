"""Reading Tika's XHTML (what both the server and the batch jar return) into pages and paragraphs: no Java needed."""

from __future__ import annotations

from mlpsych.errors import IngestError
from mlpsych.ingest.clean import CleaningOptions, clean_pages
from mlpsych.ingest.tika import _extraction_from, parse_xhtml

XHTML = """<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Paper title</title>
<meta name="Content-Type" content="application/pdf"/></head><body>
<div class="page"><p />
<p>Journal of Tests 12
</p>
<p>The first paragraph of page one is
long enough to span two lines.
</p>
<p>A second para&#173;graph with &amp; sign.
</p>
</div>
<div class="page"><p>Journal of Tests 13
</p>
<p>Page two has text (Smith et al., 2019) too.
</p>
</div>
<ul><li>Bookmark: Introduction</li></ul>
</body></html>"""


def test_parse_xhtml_pages_paragraphs_and_no_bookmarks() -> None:
    pages = parse_xhtml(XHTML)
    assert [[line.text for line in page] for page in pages] == [
        ["Journal of Tests 12", "The first paragraph of page one is", "long enough to span two lines.",
         "A second para\u00adgraph with & sign."],
        ["Journal of Tests 13", "Page two has text (Smith et al., 2019) too."],
    ]
    assert [line.para_break for line in pages[0]] == [True, True, False, True]
    assert all(line.page == 1 for line in pages[1])


def test_tika_xhtml_through_cleaning_keeps_pages() -> None:
    extraction = _extraction_from(XHTML, {"Content-Type": "application/pdf"})
    result = clean_pages(extraction.pages, CleaningOptions())
    assert result.text == (
        "The first paragraph of page one is long enough to span two lines.\n"
        "A second paragraph with & sign.\n"
        "Page two has text too."
    )
    start, end = result.pages[1]
    assert result.text[start:end] == "Page two has text too."


def test_non_paged_formats_are_one_page() -> None:
    pages = parse_xhtml("<html><body><h1>Study</h1><p>One <b>bold</b> word.</p><p>Two.</p></body></html>")
    assert len(pages) == 1 and [line.text for line in pages[0]] == ["Study", "One bold word.", "Two."]


def test_tika_exceptions_and_empty_pdfs_become_statuses() -> None:
    locked = "org.apache.tika.exception.EncryptedDocumentException: bad\n\tat x"
    encrypted = _extraction_from("", {"X-TIKA:EXCEPTION:container_exception": locked, "Content-Type": "application/pdf"})
    assert isinstance(encrypted, IngestError) and str(encrypted) == "encrypted PDF: password required"
    docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"  # a locked Word file: not a PDF
    word = _extraction_from("", {"X-TIKA:EXCEPTION:container_exception": locked, "Content-Type": docx})
    assert str(word) == "encrypted file: password required (save a copy without the password)"
    other = _extraction_from("", {"X-TIKA:EXCEPTION:container_exception": "org.apache.tika.exception.TikaException: x"})
    assert str(other) == "Tika could not parse the file (TikaException)"
    corrupt = _extraction_from("", {"X-TIKA:EXCEPTION:container_exception": "java.io.IOException: trailer\n\tat x",
                                    "Content-Type": "application/pdf"})
    assert str(corrupt) == "corrupt or unreadable PDF (Tika: IOException)"
    scanned = _extraction_from('<html><body><div class="page"><p /></div></body></html>',
                               {"Content-Type": ["application/pdf"]})
    assert str(scanned).startswith("no text layer (scanned image?)")


def test_unreachable_tika_server(monkeypatch) -> None:
    import pytest

    from mlpsych.errors import BackendUnavailable
    from mlpsych.ingest import resolve_backend

    monkeypatch.setenv("TIKA_SERVER_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(BackendUnavailable, match="Tika server not reachable at http://127.0.0.1:9"):
        resolve_backend("tika")
    assert resolve_backend("auto") == "pdfium"  # configured but down: fall back, with a warning
