"""Line numbers in the margin of a manuscript or preprint: taken out of the text, and nothing else with them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mlpsych.dev.tiny import corpus
from mlpsych.ingest import load_documents
from mlpsych.ingest.base import lines_from_text
from mlpsych.ingest.clean import CleaningOptions, clean_pages

from .conftest import tika_jar

LINES_PER_PAGE = 40


def manuscript_lines() -> list[str]:
    """About five pages of body text, wrapped as a manuscript sets it (statistics and counts included)."""
    return textwrap.wrap(" ".join(corpus(150)), 88)


def render_manuscript(path: Path, every: int | None) -> Path:
    """The text one line a row, 40 rows a page, with every ``every``-th line numbered (right-aligned in the left
    margin, smaller and in another typeface, as word processors and LaTeX's lineno print them); None: no numbers."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=letter)
    for k, line in enumerate(manuscript_lines()):
        if k and k % LINES_PER_PAGE == 0:
            pdf.showPage()
        y = letter[1] - 72 - 14 * (k % LINES_PER_PAGE)
        if every and (k + 1) % every == 0:
            pdf.setFont("Helvetica", 8)
            pdf.drawRightString(60, y, str(k + 1))
        pdf.setFont("Times-Roman", 11)
        pdf.drawString(72, y, line)
    pdf.save()
    return path


@pytest.fixture(scope="module")
def manuscripts(tmp_path_factory: pytest.TempPathFactory) -> dict[int | None, Path]:
    folder = tmp_path_factory.mktemp("manuscripts")
    return {every: render_manuscript(folder / f"numbered-{every}.pdf", every) for every in (None, 1, 5, 10)}


@pytest.mark.parametrize("every", [1, 5, 10])
def test_numbered_lines_read_as_the_unnumbered_manuscript(manuscripts: dict, every: int) -> None:
    numbered, plain = load_documents([manuscripts[every], manuscripts[None]], pdf_backend="pdfium", progress=False)
    assert numbered.meta["n_pages"] >= 4
    assert numbered.text == plain.text
    assert numbered.meta["cleaning"]["margins"]["line_numbers"] == len(manuscript_lines()) // every
    assert plain.meta["cleaning"]["margins"]["line_numbers"] == 0
    kept = load_documents(manuscripts[every], pdf_backend="pdfium", cleaning=CleaningOptions.disable("margins"),
                          progress=False)[0]
    assert kept.text != plain.text  # the test can fail: without the step the numbers are in the sentences


@pytest.mark.slow
def test_tika_reads_numbered_lines_as_the_unnumbered_manuscript(manuscripts: dict, monkeypatch) -> None:
    jar = tika_jar()
    if jar is None:
        pytest.skip("no Tika jar")
    monkeypatch.setenv("TIKA_APP_JAR", str(jar))
    docs = load_documents([manuscripts[5], manuscripts[1], manuscripts[None]], pdf_backend="tika", progress=False)
    # Tika starts a paragraph at some numbered lines (where the sentence runs on it is rejoined, where it does not,
    # a full stop then a capital, a break may stay) and spaces a line of symbols otherwise: the characters are the same
    assert ["".join(doc.text.split()) for doc in docs[:2]] == ["".join(docs[2].text.split())] * 2
    assert [doc.meta["cleaning"]["margins"]["line_numbers"] for doc in docs] == [len(manuscript_lines()) // 5,
                                                                                 len(manuscript_lines()), 0]


def clean(pages: list[str]) -> tuple[str, int]:
    result = clean_pages(lines_from_text(pages), CleaningOptions())
    return result.text, result.report["margins"]["line_numbers"]


def prose(page: int, lines: int = 12) -> list[str]:
    return [f"the {page}-th page says thing {k} about the sample and the model" for k in range(lines)]


def test_numbers_at_the_line_ends_and_a_short_last_page_carried_on() -> None:
    pages, number = [], 0
    for page in range(3):
        numbered = []
        for line in prose(page, 12 if page < 2 else 3):
            number += 1
            numbered.append(f"{line} {number}")
        pages.append("\n".join(numbered))
    text, cut = clean(pages)
    assert cut == 27
    assert text == clean(["\n".join(prose(page, 12 if page < 2 else 3)) for page in range(3)])[0]


def test_a_numbered_table_or_list_on_one_page_is_content() -> None:
    table = [f"{k} Item {k} of the scale loads {0.5 + k / 100:.2f} on the first factor" for k in range(1, 11)]
    pages = ["\n".join(prose(0)), "\n".join(prose(1) + table), "\n".join(prose(2)), "\n".join(prose(3))]
    text, cut = clean(pages)
    assert cut == 0
    assert "1 Item 1 of the scale" in text and "10 Item 10 of the scale" in text


def test_numbers_that_do_not_rise_in_step_are_not_line_numbers() -> None:
    # counts and years at the start of lines on every page: no steady step from one to the next
    starts = ["312", "1998", "45", "2019", "7", "87", "640", "12", "2150", "3"]
    pages = ["\n".join(f"{n} {line}" for n, line in zip(starts, prose(page, 10))) for page in range(4)]
    text, cut = clean(pages)
    assert cut == 0 and "2019 the" in text


def test_a_count_far_down_the_paper_does_not_carry_on_the_first_pages_numbers() -> None:
    # numbers on lines of their own before each text line (as pdfium reads a number set well apart); on the last
    # page a sentence starts with "5", one more than a line number of the first page
    number, pages = 0, []
    for page in range(4):
        lines = []
        for k, line in enumerate(prose(page)):
            number += 1
            lines += [str(number), "5 participants were excluded for missing data" if (page, k) == (3, 6) else line]
        pages.append("\n".join(lines))
    text, cut = clean(pages)
    assert cut == 48
    assert "5 participants were excluded" in text and "46" not in text.split()


def test_page_numbers_alone_are_not_line_numbers() -> None:
    # one number a page, rising page after page, and a sentence ending in a small number between two of them
    pages = [f"{page + 1}\n" + "\n".join(prose(page)) for page in range(6)]
    pages[3] = pages[3].replace("thing 5 about the sample and the model", "thing ends with 3")
    text, cut = clean(pages)
    assert cut == 0 and "thing ends with 3" in text
