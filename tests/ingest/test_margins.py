"""Margin and overlay text (issue 22, item 2): stamps as real journals print them, on hand-made lines."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mlpsych.dev.synth import SynthPaper, render_pdf
from mlpsych.ingest import load_documents
from mlpsych.ingest.base import Line, lines_from_text
from mlpsych.ingest.clean import CleaningOptions, clean_pages
from mlpsych.ingest.margins import find_notices, remove_margins

from .conftest import TYPEFACES, paper, typeset_in

APA_COPYRIGHT = ("This document is copyrighted by the American Psychological Association or one of its allied "
                 "publishers.")
APA_PERSONAL = ("This article is intended solely for the personal use of the individual user and is not to be "
                "disseminated broadly.")
ROYAL = "Downloaded from https://royalsocietypublishing.org/ on 24 July 2025"
PREPRINT = "DeBruine et al. preprint v.2"
FILLER = ["Each person in the sample rated every face twice on a seven-point scale.",
          "The ratings were averaged across the two sessions before any analysis.",
          "Participants who failed an attention check were excluded from the data."]


def body(page: int, lines: int = 14) -> str:
    """A page of distinct body lines (stamps are learned only on pages longer than the top and foot zones)."""
    return "\n".join(f"Line {k} of page {page}: {FILLER[(page + k) % 3]}" for k in range(lines))


def clean(pages: list[str]) -> tuple[str, dict]:
    result = clean_pages(lines_from_text(pages), CleaningOptions())
    return result.text, result.report["margins"]


@pytest.mark.parametrize(
    "notice",
    [
        APA_COPYRIGHT,
        APA_PERSONAL,
        "Content may be shared at no cost, but any requests to reuse this content in part or whole must go through "
        "the American Psychological Association.",
        ROYAL,
        "Downloaded from https://academic.oup.com/scan/article/15/2/1/5766 by guest on 24 July 2025",
        "Downloaded from https://onlinelibrary.wiley.com/doi/10.1111/cdev.13 by Test University, Wiley Online "
        "Library on [24/07/2025]. See the Terms and Conditions (https://onlinelibrary.wiley.com/terms-and-conditions)"
        " on Wiley Online Library for rules of use; OA articles are governed by the applicable Creative Commons "
        "License",
        "This content downloaded from 128.1.2.3 on Mon, 24 Jul 2025 12:00:00 UTC All use subject to "
        "https://about.jstor.org/terms",
        "959594 PSSXXX10.1177/0956797620959594Sheetal et al.Using Machine Learning to Generate Hypotheses "
        "research-article2020",
    ],
)
def test_notices_matched_whole_however_broken_up(notice: str) -> None:
    assert find_notices(notice) == [(0, len(notice))]
    broken = notice.replace(" ", "\n", 3)
    assert find_notices(broken) == [(0, len(broken))]
    # Tika's reading of a notice rotated up the margin: a few letters per line
    pieces = "\n".join(notice[k : k + 3] for k in range(0, len(notice), 3))
    assert find_notices(f"body text ends.\n{pieces}\nNext page starts") == [(16, 16 + len(pieces))]


def test_apa_notice_spliced_mid_word_between_lines_is_cut_and_the_word_rejoined() -> None:
    # Extraction order put the margin notice between the halves of "per-son" (Tika, APA journals).
    page = f"{FILLER[0]}\nThe experimenter asked whether the per-\n{APA_PERSONAL}\n{APA_COPYRIGHT}\nson fails the task."
    text, report = clean([page])
    assert "asked whether the person fails the task." in text
    assert "copyrighted" not in text and "personal use" not in text
    assert report["notices"] == 2


def test_notice_spliced_inside_one_line_is_cut_and_the_sentence_rejoined() -> None:
    page = (f"{FILLER[0]}\nThe experimenter asked whether the per-{APA_PERSONAL} son fails the task.\n"
            f"Effects were {ROYAL} large in both groups of participants.")
    text, report = clean([page])
    assert "asked whether the person fails the task." in text
    assert "Effects were large in both groups of participants." in text
    assert report["notices"] == 2 and "Downloaded" not in text


def test_hyphenated_compound_split_by_a_notice_keeps_its_hyphen() -> None:
    page = f"Cross-fostered pups grew up.\nThe cross-{APA_COPYRIGHT} fostered pups were calm."
    text, _ = clean([page])
    assert "The cross-fostered pups were calm." in text


def test_running_stamp_learned_on_most_pages_and_cut_where_spliced() -> None:
    pages = [body(k) + f"\n{PREPRINT}\n{k + 1}" for k in range(4)]
    pages.append(body(4).replace("Line 3 ", f"In the second block participants {PREPRINT} rated the faces again. "))
    text, report = clean(pages)
    assert "preprint" not in text
    assert "In the second block participants rated the faces again. of page 4" in text
    assert report["spliced"] == 1 and report["stamps"] == 4


def test_running_title_in_plain_words_is_not_cut_out_of_the_title() -> None:
    # A running head repeating the start of the paper's title is removed as a line, never cut from the title.
    title = "Mind the Depth: Visual Perception of Shapes"
    pages = [f"{title}\n{body(0)}"] + [f"Mind the Depth\n{body(k)}" for k in range(1, 5)]
    text, report = clean(pages)
    assert text.startswith(title) and text.count("Mind the Depth") == 1 and report["spliced"] == 0


def test_a_page_of_one_repeated_line_is_content_not_a_stamp() -> None:
    pages = [f"Chapter text on page {k} of the long book about groups." for k in range(6)]
    text, report = clean(pages)
    assert text.count("Chapter text on page") == 6 and report["stamps"] == 0


def geometry_page(page: int, extra: list[Line]) -> list[Line]:
    body = [Line(f"Body line {k} of page {page} with enough words to be body text in a column.", page,
                 y=0.1 + 0.03 * k, size=10.0, x0=0.12, x1=0.88) for k in range(25)]
    return body[:10] + extra + body[10:]


def test_rotated_and_beside_block_lines_removed_landscape_pages_kept() -> None:
    margin = Line(APA_COPYRIGHT.replace("copyrighted", "stamped"), 0, y=0.2, size=8.0, x0=0.02, x1=0.03,
                  rotated=True)
    sidebar = Line("Submitted 25 March 2016", 0, y=0.6, size=9.0, x0=0.01, x1=0.1)
    hidden = Line("795679PSSXXX10.1177/0956797618795679Blini et al.Mind the Depth", 0, y=0.003, size=1.0, x0=0.015,
                  x1=0.117)
    axis = Line("Gain (ms)", 1, y=0.5, size=8.0, x0=0.3, x1=0.32, rotated=True)
    landscape = [Line(f"Rotated table row {k} with cells", 2, y=0.1 + 0.05 * k, size=9.0, x0=0.3, x1=0.35,
                      rotated=True) for k in range(10)]
    pages = [geometry_page(0, [margin, sidebar, hidden]), geometry_page(1, [axis]), landscape]
    out, report = remove_margins(pages, 10.0)
    assert report["rotated"] == 2 and report["beside_block"] == 1 and report["tiny"] == 1
    assert [len(page) for page in out] == [25, 25, 10]


def stamped_paper() -> SynthPaper:
    """The journal-like test paper with the APA notices and the Royal Society download line printed up the left
    margin of every page (after the page's text, as an overlay) and a repository stamp at every page foot."""
    return dataclasses.replace(paper(), margin_notes=[APA_COPYRIGHT, APA_PERSONAL, ROYAL], foot_stamp=PREPRINT)


@pytest.fixture(scope="module", params=TYPEFACES)
def stamped_pdfs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("stamps")
    with typeset_in(request.param):
        render_pdf(stamped_paper(), folder / "stamped.pdf")
        render_pdf(paper(), folder / "plain.pdf")
    return folder / "stamped.pdf", folder / "plain.pdf"


def test_pdf_stamps_removed_and_text_as_without_them(stamped_pdfs: tuple[Path, Path]) -> None:
    stamped, plain = load_documents(list(stamped_pdfs), pdf_backend="pdfium", progress=False)
    assert stamped.text == plain.text
    report = stamped.meta["cleaning"]["margins"]
    assert report["rotated"] >= 3 * stamped.meta["n_pages"] and report["stamps"] >= stamped.meta["n_pages"]
    with_stamps = load_documents(stamped_pdfs[0], pdf_backend="pdfium", cleaning=CleaningOptions.disable("margins"),
                                 progress=False)[0]
    assert "personal use" in with_stamps.text  # the test can fail: without the step the notices are there
