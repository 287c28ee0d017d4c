"""Section headings set as close to their text as two lines of a paragraph (pdfium): a heading line larger than the
body text, or all bold at its size, is a paragraph of its own; bold run-in headings, bold words, ordinary short
lines and small table or footer lines beside the body are not taken for headings.

The pages are drawn line by line with reportlab's canvas at one line pitch (no gap before or after a heading), as
"Study 1: Machine Learning" (12 pt over 10-pt text) and PLOS ONE's bold 10-pt headings stand in the real PDFs where
the heading opened the paragraph's first sentence ("Study 1: Machine Learning The goal of Study 1 ...").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mlpsych.ingest import load_documents

PITCH = 12  # points between baselines, body and heading alike
FILLER = "and the coders read every essay twice before the labels were compared across the two groups"


@pytest.fixture(autouse=True)
def _no_tika(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKA_APP_JAR", raising=False)
    monkeypatch.delenv("TIKA_SERVER_ENDPOINT", raising=False)


def _draw(path: Path, pages: list[list[list[tuple[str, str, float]]]], footer: str | None = None) -> None:
    """Each page a list of rows, each row a list of (text, font, size) runs, drawn top-down at one line pitch;
    ``footer`` (8 pt) is drawn first on every page, at its foot, as PLOS ONE's page footer comes first in content
    order."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=letter)
    for k, rows in enumerate(pages):
        if footer:
            pdf.setFont("Helvetica", 8)
            pdf.drawString(72, 40, f"{footer} {k + 1}")
        for n, runs in enumerate(rows):
            text = pdf.beginText(72, 720 - PITCH * n)
            for piece, font, size in runs:
                text.setFont(font, size)
                text.textOut(piece)
            pdf.drawText(text)
        pdf.showPage()
    pdf.save()


def body(text: str) -> list[tuple[str, str, float]]:
    return [(text, "Times-Roman", 10)]


def paragraph(opening: str, lines: int = 4) -> list[list[tuple[str, str, float]]]:
    """A paragraph whose lines are all as long as the text block (none short enough to end a paragraph)."""
    return [body(f"{opening} {FILLER}")] + [body(f"{k} {FILLER}") for k in range(1, lines)]


def read(path: Path) -> str:
    (document,) = load_documents(path, pdf_backend="pdfium", progress=False)
    assert document.ok, document.status
    return document.text


def test_a_larger_heading_is_its_own_paragraph(tmp_path: Path) -> None:
    path = tmp_path / "larger.pdf"
    rows = (paragraph("Earlier work found effects")
            + [[("Study 1: Machine Learning", "Times-Roman", 12)]]
            + paragraph("The goal of Study 1 was to identify predictors"))
    _draw(path, [rows * 3])
    lines = read(path).split("\n")
    assert lines.count("Study 1: Machine Learning") == 3
    k = lines.index("Study 1: Machine Learning")
    assert lines[k - 1].endswith(FILLER) and lines[k + 1].startswith("The goal of Study 1 was")


def test_a_bold_heading_at_the_body_size_is_its_own_paragraph(tmp_path: Path) -> None:
    path = tmp_path / "bold.pdf"
    heading = "Inter-coder and Intra-coder reliability"
    rows = (paragraph("The horses were filmed")
            + [[(heading, "Helvetica-Bold", 10)]]
            + paragraph("Following the second coding by a different coder"))
    _draw(path, [rows * 3])
    lines = read(path).split("\n")
    assert lines.count(heading) == 3
    k = lines.index(heading)
    assert lines[k - 1].endswith(FILLER) and lines[k + 1].startswith("Following the second coding")


def test_run_in_headings_and_bold_words_stay_in_their_paragraph(tmp_path: Path) -> None:
    """A bold run-in heading shares its first line with the text, or runs on in bold into the next line (PLOS
    ONE's "Characterisation of ... positive and" / "negative conditions. Prior to analysis ..."); a bold word in a
    line and an italic line are body text. The run-in heading's all-bold line starts its paragraph."""
    path = tmp_path / "runin.pdf"
    long_heading = "Characterisation of specific behaviours and facial expressions in response to positive and"
    rows = ([[("Participants. ", "Times-Bold", 10), (f"Twenty mares {FILLER}", "Times-Roman", 10)]]
            + [body(f"{k} {FILLER}") for k in range(3)]
            + [[(long_heading, "Times-Bold", 10)]]
            + [[("negative conditions. ", "Times-Bold", 10), (f"Prior to analysis {FILLER}", "Times-Roman", 10)]]
            + [body(f"{k} {FILLER}") for k in range(3)]
            + [[("the ", "Times-Roman", 10), ("frequency", "Times-Bold", 10), (f" of {FILLER}", "Times-Roman", 10)]]
            + [[(f"in an italic line {FILLER}", "Times-Italic", 10)]]
            + [body(f"last line {FILLER}")])
    _draw(path, [rows])
    paragraphs = read(path).split("\n")
    assert len(paragraphs) == 2, paragraphs
    assert paragraphs[0].startswith("Participants. Twenty mares") and paragraphs[0].endswith(f"2 {FILLER}")
    assert paragraphs[1].startswith(f"{long_heading} negative conditions. Prior to analysis")


def test_small_lines_beside_the_body_are_no_headings_for_it(tmp_path: Path) -> None:
    """A page of 8-pt table rows, whose footer comes first in content order: the 10-pt line that goes on with the
    previous page's sentence is the paper's body text, not a heading above the page's 8-pt text (the body size is
    the document's, not the page's)."""
    path = tmp_path / "table.pdf"
    first = paragraph("The heart rate", 20)[:-1] + [body("another physiological indicator of the arousal of a")]
    table = [[(f"AU{k}   Lip Corner Puller   {k / 10:.2f}   {k / 7:.3f}   {k}", "Helvetica", 8)]
             for k in range(40)]
    second = [body("situation is the heart rate in horses, as the studies show.")] + table
    _draw(path, [first, second], footer="PLOS One | https://doi.org/10.1371/journal.pone.0 May 14, 2025 |")
    text = read(path)
    assert "the arousal of a situation is the heart rate in horses" in text
