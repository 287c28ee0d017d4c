"""The embedded pdfium backend on journal-like PDFs typeset in the test (reportlab)."""

from __future__ import annotations

import re
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from mlpsych.ingest import CleaningOptions, load_documents
from mlpsych.ingest.pdf import extract_pdf

from .conftest import LEFT_MARK


@pytest.fixture(autouse=True)
def _no_tika(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKA_APP_JAR", raising=False)
    monkeypatch.delenv("TIKA_SERVER_ENDPOINT", raising=False)


def raw_page_of(path: Path, needle: str) -> int:
    """1-based page whose raw PDFium text holds ``needle`` (whitespace and hyphenation ignored)."""
    squash = lambda s: re.sub(r"[\s\-\ufffe\x02]+", "", s)  # noqa: E731
    document = pdfium.PdfDocument(str(path))
    try:
        for k in range(len(document)):
            if squash(needle) in squash(document[k].get_textpage().get_text_range()):
                return k + 1
    finally:
        document.close()
    raise AssertionError(f"{needle!r} not in the PDF")


def test_pdfium_two_column_paper_is_clean_and_in_order(synth_pdf) -> None:
    path, info = synth_pdf
    (document,) = load_documents(path, pdf_backend="auto", progress=False)
    assert document.ok, document.status
    assert document.meta["backend"] == "pdfium"
    assert info.n_pages >= 3 and len(document.pages) == info.n_pages
    assert document.meta["cleaning"]["columns"]["two_column_pages"] >= info.n_pages - 1
    text = document.text
    markers = [f"{word} paragraph {k}" for k in range(6) for word in ("Alpha", "Bravo", "Charlie", "Delta")]
    positions = [text.find(marker) for marker in markers]
    assert -1 not in positions, [m for m, p in zip(markers, positions) if p < 0]
    assert positions == sorted(positions)
    for leaked in ("Journal of Synthetic", "Labels and Bias", "Corresponding author", "Figure 1. Accuracy",
                   "Walker, P.", "(Smith et al., 2019)", "[12]"):
        assert leaked not in text
    assert "support vector machines (SVM)" in text
    assert not re.search(r"^\d+$", text, re.MULTILINE)  # no page-number lines
    assert "cross-validation" in text and "bag-of-words" in text


def test_pdfium_page_map_points_at_the_right_page(synth_pdf) -> None:
    path, _ = synth_pdf
    (document,) = load_documents(path, pdf_backend="pdfium", progress=False)
    for k in range(6):
        marker = f"Delta paragraph {k} discusses"
        assert document.page_at(document.text.index(marker)) == raw_page_of(path, marker)


def test_no_cleaning_keeps_boilerplate(synth_pdf) -> None:
    path, _ = synth_pdf
    (document,) = load_documents(path, pdf_backend="pdfium", cleaning=CleaningOptions.off(), progress=False)
    assert "Journal of Synthetic" in document.text and "Walker, P." in document.text
    assert document.meta["cleaning"]["steps"] == []


def _interleaved_pdf(path: Path) -> tuple[list[str], list[str]]:
    """Two columns drawn row by row (left line, right line, ...): content order is not reading order."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    left = [f"left column line {k} of the story goes on" for k in range(30)]
    right = [f"right column line {k} continues after" for k in range(30)]
    pdf = canvas.Canvas(str(path), pagesize=letter)
    pdf.setFont("Helvetica", 9)
    for k in range(30):
        y = 720 - 14 * k
        pdf.drawString(54, y, left[k])
        pdf.drawString(320, y, right[k])
    pdf.showPage()
    pdf.save()
    return left, right


def test_columns_step_restores_reading_order(tmp_path: Path) -> None:
    path = tmp_path / "interleaved.pdf"
    left, right = _interleaved_pdf(path)
    (document,) = load_documents(path, pdf_backend="pdfium", progress=False)
    text = document.text
    assert text.index(left[-1]) < text.index(right[0])
    assert all(text.index(a) < text.index(b) for a, b in zip(left, left[1:]))
    (naive,) = load_documents(path, pdf_backend="pdfium", cleaning=CleaningOptions.disable("columns"),
                              progress=False)
    assert naive.text.index(right[0]) < naive.text.index(left[-1])


def _sidebar_pdf(path: Path) -> tuple[str, list[str]]:
    """A one-column page with a journal's side block (PLOS ONE's licence, data and funding notes) in small type to
    the left of the body, drawn after the body as PLOS ONE draws it; the body's last sentence runs on to page 2,
    whose body is as wide as the page, as PLOS ONE's is from page 3 (so the block is not margin text)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    body = [f"Line {k} of the body says that the horses waited in the box for a while." for k in range(36)]
    body[-1] = "Another well-established physiological indicator of the arousal of a"
    side = ["Data availability statement: All files are", "available from the online repository.",
            "Funding: This work was funded by the", "Example Foundation for horse research.",
            "Competing interests: The authors have", "declared that no competing interests exist."]
    pdf = canvas.Canvas(str(path), pagesize=letter)
    pdf.setFont("Helvetica", 10)
    for k, line in enumerate(body):
        pdf.drawString(220, 740 - 18 * k, line)
    pdf.setFont("Helvetica", 7)
    for k, line in enumerate(side):
        pdf.drawString(40, 600 - 11 * k, line)
    pdf.showPage()
    pdf.setFont("Helvetica", 10)
    pdf.drawString(40, 740, "situation is the heart rate in horses and other animals, as the studies show.")
    for k in range(1, 30):
        pdf.drawString(40, 740 - 18 * k, f"Line {k} of the second page goes on about the horses that waited in the "
                                          "starting box.")
    pdf.showPage()
    pdf.save()
    return "Another well-established physiological indicator of the arousal of a situation is the heart rate", side


def test_a_side_block_is_read_before_the_body_not_inside_its_last_sentence(tmp_path: Path) -> None:
    """PLOS ONE's side block came after the page's last body line in content order, so the sentence running on to
    the next page read "... the arousal of a Data availability statement: ... exist. situation is the heart rate"."""
    path = tmp_path / "sidebar.pdf"
    sentence, side = _sidebar_pdf(path)
    (document,) = load_documents(path, pdf_backend="pdfium", progress=False)
    text = " ".join(document.text.split())
    assert sentence in text
    start = document.text.index("Another well-established")
    assert "Funding" not in document.sentence_around(start, start + 10)
    assert all(line in text for line in side)  # kept, as one block before the body of its page
    assert text.index(side[-1]) < text.index("Line 0 of the body") and document.page_at(text.index(side[0])) == 1
    (naive,) = load_documents(path, pdf_backend="pdfium", cleaning=CleaningOptions.disable("columns"),
                              progress=False)
    assert sentence not in " ".join(naive.text.split())  # pdfium's own order, as before


def test_ligatures_in_pdf_come_back_as_letters(tmp_path: Path, typeface: str) -> None:
    from mlpsych.dev.synth import SynthPaper, render_pdf

    path = tmp_path / "lig.pdf"
    render_pdf(SynthPaper("Ligatures", ["The final fluent figures were significant in the first field study."] * 8),
               path, ligatures=True)
    (document,) = load_documents(path, pdf_backend="pdfium", progress=False)
    assert "final fluent figures were significant in the first field" in document.text
    assert "\ufb01" not in document.text


def test_left_marker_constant_is_in_text(synth_pdf) -> None:
    (document,) = load_documents(synth_pdf[0], pdf_backend="pdfium", progress=False)
    assert document.text.startswith("Category Labels in Minimal Groups")
    assert LEFT_MARK.replace("paragraph", "paragraph 0") in document.text


def test_preprint_hyphens_stored_as_three_characters_read_as_one(tmp_path: Path, typeface: str) -> None:
    # The hyphen glyph of the PDF reads back as "-" + U+00AD + U+2010 (typed hyphens and line-end hyphenation alike):
    # the cleaned text must equal that of the same paper with plain hyphens.
    from mlpsych.dev.synth import SOFT_HYPHEN_CLAIM, render_pdf, soft_hyphen_paper

    render_pdf(soft_hyphen_paper(), tmp_path / "plain.pdf")
    render_pdf(soft_hyphen_paper(), tmp_path / "soft.pdf", claims={"-": SOFT_HYPHEN_CLAIM})
    plain, soft = load_documents([tmp_path / "plain.pdf", tmp_path / "soft.pdf"], pdf_backend="pdfium",
                                 progress=False)
    assert "\u00ad" in "".join(ln.text for page in extract_pdf(tmp_path / "soft.pdf").pages for ln in page)
    assert soft.text == plain.text
    assert "--" not in soft.text and "\u00ad" not in soft.text and "\u2010" not in soft.text
    assert "Cross-fostered pups" in soft.text and "(B = -0.059, SE = 0.021)" in soft.text
    assert "self-referential encoding" in soft.text


def _superscripts_pdf(path: Path) -> None:
    """Body lines with raised small numbers: footnote and affiliation numbers after words, exponents after one or
    two letters (acl-2014 sets its footnote number at 8 pt on 10.9 pt text, raised 4 pt)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    rows = [
        [("We use the word2vec software", 0), ("3", 1), (" to build vectors of size 300.", 0)],
        [("Ada Lovelace", 0), ("1,2", 1), (", Charles Babbage", 0), ("2", 1)],
        [("The model explained more variance, R", 0), ("2", 1), (" = .34, than", 0)],
        [("the baseline did, and each plot was 4 km", 0), ("2", 1), (" in area.", 0)],
        [("Words were scored as the coding manual says.", 0), ("2", 1), (" Then", 0)],
        [("Numbered citations follow earlier studies", 0), ("7–9,12", 1), (" in this journal.", 0)],
        [("Neither did distance, X", 0), ("2", 1), ("(1, N = 20) = 1.52, p = .217, improve the fit.", 0)],
    ]
    pdf = canvas.Canvas(str(path), pagesize=letter)
    for k, row in enumerate(rows):
        text = pdf.beginText(72, 700 - 16 * k)
        for piece, raised in row:
            text.setFont("Times-Roman", 8 if raised else 10.9)
            text.setRise(4 if raised else 0)
            text.textOut(piece)
        pdf.drawText(text)
    pdf.setFont("Times-Roman", 8)
    pdf.drawString(72, 90, "3 Available at https://code.google.com/p/word2vec/")
    pdf.showPage()
    pdf.save()


def test_footnote_numbers_after_words_are_left_out_exponents_kept(tmp_path: Path) -> None:
    # "software3" read as one word hides the tool's name from a q2 answer; "R2" and "km2" are what was printed.
    path = tmp_path / "superscripts.pdf"
    _superscripts_pdf(path)
    (document,) = load_documents(path, pdf_backend="pdfium", progress=False)
    text = " ".join(document.text.split())  # PDFium ends a line after a raised number: the cleaner joins them
    assert "We use the word2vec software to build vectors of size 300." in text
    assert "Ada Lovelace, Charles Babbage " in text
    assert "The model explained more variance, R2 = .34, than" in text
    assert "the baseline did, and each plot was 4 km2 in area." in text
    assert "as the coding manual says. Then" in text
    assert "follow earlier studies in this journal." in text
    # nothing put between an exponent and what is closed up to it: the statistic reads as printed
    assert "Neither did distance, X2(1, N = 20) = 1.52, p = .217, improve the fit." in document.text
