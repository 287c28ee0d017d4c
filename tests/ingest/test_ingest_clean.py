"""Cleaning rules on hand-made lines: each step alone, and the page map after all of them."""

from __future__ import annotations

import re

import pytest

from mlpsych.documents import Document
from mlpsych.errors import UnknownChoice
from mlpsych.ingest.base import Line, lines_from_text
from mlpsych.ingest.clean import (
    CleaningOptions,
    apply_edits,
    clean_pages,
    find_citations,
)

ONLY = {name: CleaningOptions.disable([s for s in CleaningOptions.steps() if s != name]) for name in CleaningOptions.steps()}


def clean_text(text: str, step: str) -> str:
    return clean_pages(lines_from_text([text]), ONLY[step]).text


def strip_citations(text: str) -> str:
    edits, _ = find_citations(text)
    return apply_edits(text, [(0, len(text))], edits)[0]


# ---------------------------------------------------------------------------------------------------------- options


def page_ranges_consistent(text: str, pages: list[tuple[int, int]]) -> bool:
    """True when page ranges are ordered, non-overlapping and inside the text."""
    last = 0
    for start, end in pages:
        if not (last <= start <= end <= len(text)):
            return False
        last = end
    return True


def test_options_disable_parses_names_aliases_and_all() -> None:
    options = CleaningOptions.disable("citations, Footers")
    assert options.citations is False and options.headers is False and options.references is True
    assert CleaningOptions.disable(["dehyphenation", "ligatures"]).enabled() == [
        "margins", "headers", "footnotes", "captions", "references", "citations", "columns"
    ]
    assert CleaningOptions.disable("all").enabled() == []
    with pytest.raises(UnknownChoice, match="unknown cleaning step 'bogus'"):
        CleaningOptions.disable("bogus")


# ---------------------------------------------------------------------------------------------------------- unicode


def test_unicode_ligatures_soft_hyphens_and_spaces() -> None:
    text = "The \ufb01nal \ufb02ow of e\u00adffects\u00a0was sig\u00adnificant \u2010 twice"
    assert clean_text(text, "unicode") == "The final flow of effects was significant - twice"


def test_unicode_typographic_quotes_become_ascii() -> None:
    # pdfLaTeX prints a typed ' as U+2019 and ``...'' as U+201C/U+201D; Word's autocorrect does the same. An answer
    # or a question written with ASCII quotes ("Ward's method") must still match the cleaned text verbatim.
    text = "Ward\u2019s method, termed \u201cchopped picture\u201d, and the \u2018best\u2019 fit"
    assert clean_text(text, "unicode") == "Ward's method, termed \"chopped picture\", and the 'best' fit"
    assert clean_pages(lines_from_text([text]), CleaningOptions.off()).text == text  # only when the step is on


@pytest.mark.parametrize(
    "stored, expected",
    [
        ("cross-\u00ad\u2010fostered pups", "cross-fostered pups"),  # a preprint's hyphen: three characters
        ("B = -\u00ad\u20100.059", "B = -0.059"),
        ("non\u2011fostered and pre\u2010registered", "non-fostered and pre-registered"),
        ("sig\u00adnificant", "significant"),  # a soft hyphen inside a line is an unused break point
        ("two -- dashes typed", "two -- dashes typed"),  # ASCII as typed is left alone
    ],
)
def test_hyphen_look_alikes_leave_one_hyphen(stored: str, expected: str) -> None:
    assert clean_text(stored, "unicode") == expected


@pytest.mark.parametrize("stored", ["-\u00ad\u2010", "\u2010", "\u00ad", "-\u00ad"])
def test_line_end_hyphen_look_alikes_joined_like_plain_hyphens(stored: str) -> None:
    lines = "a self-referential task and the self{h}\nreferential coding of the meth{h}\nods in the study"
    both = CleaningOptions.disable(["headers", "footnotes", "captions", "references", "citations", "columns"])
    out = clean_pages(lines_from_text([lines.format(h=stored)]), both).text
    assert out == clean_pages(lines_from_text([lines.format(h="-")]), both).text
    assert out == "a self-referential task and the self-referential coding of the methods in the study"


# ------------------------------------------------------------------------------------------------------ hyphenation


def test_a_kept_hyphen_at_a_page_end_closes_up_only_on_a_continuation() -> None:
    """Regression (acl-2014.pdf): page 6 ends "for which the dimen-", page 7 starts with a table headed "Training";
    the hyphen closed up into "dimen-Training". Across pages a capital closes up only where the text writes the
    compound; a syllable, a number and a known compound still do."""
    pages = ["Count spaces, for which the dimen-", "Training\ncount observed\nsions are shared.",
             "Both the COVID-", "19 pandemic and the meth-", "ods of Random-", "Forest work, as Random-Forest does."]
    out = clean_pages(lines_from_text(pages), ONLY["hyphenation"]).text
    assert "dimen-Training" not in out and re.search(r"the dimen-\s+Training count", out)
    assert "COVID-19" in out and "methods" in out and "of Random-Forest work" in out


def test_hyphenation_joins_syllable_breaks_but_keeps_real_compounds() -> None:
    text = (
        "We used cross-validation and other meth-\n"
        "ods with ten folds of cross-\n"
        "validation on a closed-form prob-\n"
        "lem during the COVID-\n"
        "19 pandemic and a stay-at-\n"
        "home order, 100 nine-year-olds and 108 eight-\n"
        "year-olds used scik-\n"
        "it-learn to avoid over-fit-\n"
        "ting with LAS-\n"
        "SO."
    )
    out = clean_text(text, "hyphenation")
    assert "methods" in out and "meth-" not in out
    assert "ten folds of cross-validation" in out  # the document spells it with a hyphen elsewhere
    assert "problem" in out
    assert "COVID-19" in out
    assert "stay-at-home" in out  # the left part is a compound already
    assert "108 eight-year-olds" in out  # the right part is a compound the text writes elsewhere
    assert "used scikit-learn to" in out  # a syllable break inside a compound's first word
    assert "over-fitting" in out and "LASSO." in out
    off = clean_pages(lines_from_text([text]), CleaningOptions.off()).text
    assert "meth- ods" in off or "meth-\nods" in off


def test_a_dash_closed_up_at_a_line_end_joins_the_next_word_without_a_space() -> None:
    text = (
        "data from three different countries\u2014\n"
        "Ireland, the United States and the United Kingdom, pages 117\u2013\n"
        "122 of the report; a spaced dash \u2014\n"
        "stays spaced, as does a hyphen-less line\n"
        "end."
    )
    result = clean_pages(lines_from_text([text]), ONLY["hyphenation"])
    assert result.text == (
        "data from three different countries\u2014Ireland, the United States and the United Kingdom, pages "
        "117\u2013122 of the report; a spaced dash \u2014 stays spaced, as does a hyphen-less line end."
    )
    assert result.report["hyphenation"]["dash_closed_up"] == 2
    off = clean_pages(lines_from_text([text]), CleaningOptions.off()).text
    assert "countries\u2014 Ireland" in off  # only when the step is on


@pytest.mark.timeout(60)
def test_a_megabyte_line_without_spaces_is_assembled_quickly() -> None:
    # The line-end hyphen search once ran over the whole previous line: cubic, 20 s for 2,000 characters.
    text = "x" * 2**20 + "\nnext line"
    assert clean_pages(lines_from_text([text]), CleaningOptions()).text == "x" * 2**20 + " next line"


# ---------------------------------------------------------------------------------------------------------- headers


def test_running_headers_footers_and_page_numbers_removed() -> None:
    pages = []
    for number in range(1, 6):
        header = "Journal of Social Studies 2021, Vol. 3" if number % 2 else "Roe and Doe"
        pages.append(f"{header}\nBody text of page {number} goes on here.\nMore body text for page {number} here.\n{number}")
    result = clean_pages(lines_from_text(pages), ONLY["headers"])
    assert "Journal of Social Studies" not in result.text
    assert "Roe and Doe" not in result.text
    assert "Body text of page 3 goes on here." in result.text
    lines = result.text.splitlines()
    assert not any(line.strip().isdigit() for line in lines)
    assert result.report["headers"]["page_numbers"] == 5
    assert result.report["headers"]["lines"] == 5


def test_headers_use_geometry_when_known() -> None:
    """With positions, a header drawn last in the content stream is still found at the top of the page."""
    pages = []
    for p in range(3):
        pages.append(
            [
                Line(f"First body line of page {p} here.", p, y=0.1, size=10),
                Line(f"Second body line of page {p} here.", p, y=0.5, size=10),
                Line(f"Last body line of page {p} here.", p, y=0.8, size=10),
                Line("ACME Review", p, y=0.03, size=8),
            ]
        )
    result = clean_pages(pages, ONLY["headers"])
    assert "ACME" not in result.text and result.text.count("body line of page") == 9


# -------------------------------------------------------------------------------------------------------- footnotes


def test_footnotes_small_font_at_page_foot_removed() -> None:
    page = [
        Line("Body text in the normal size that fills the page.", 0, y=0.1, size=10, x0=0.1, x1=0.9),
        Line("More body text in the normal size to the end.", 0, y=0.6, size=10, x0=0.1, x1=0.9),
        Line("1 This study was funded by a grant.", 0, y=0.9, size=7, x0=0.1, x1=0.6),
        Line("A small-font note in the middle stays.", 0, y=0.3, size=7, x0=0.1, x1=0.9),
    ]
    result = clean_pages([page], ONLY["footnotes"])
    assert "funded" not in result.text
    assert "middle stays" in result.text
    assert result.report["footnotes"]["lines"] == 1


# --------------------------------------------------------------------------------------------------------- captions


def test_captions_dropped_but_references_to_figures_kept() -> None:
    text = (
        "Results are shown below.\n\n"
        "Figure 2. Mean accuracy of the\n"
        "classifier across folds.\n\n"
        "Table 1 shows the descriptive statistics of the sample.\n\n"
        "Table 3\n"
        "Descriptive Statistics and Correlations\n\n"
        "The end of the section."
    )
    out = clean_text(text, "captions")
    assert "Mean accuracy" not in out and "across folds" not in out
    assert "Table 1 shows the descriptive statistics" in out
    assert "Descriptive Statistics and Correlations" not in out
    assert "The end of the section." in out


def test_a_caption_label_ending_a_body_sentence_is_body_text() -> None:
    # pdfium and Tika both give this line of a real article (Psychological Science) without a paragraph break.
    text = (
        "For more details regarding these specifications, see the far-right column of\n"
        "Table 1.\n"
        "The specification results are plotted in the rightmost column of Figure 1.\n\n"
        "Figure 1. Results of the specification-curve\n"
        "analysis for all data sets."
    )
    result = clean_pages(lines_from_text([text]), ONLY["captions"])
    assert "see the far-right column of Table 1. The specification results are plotted" in " ".join(result.text.split())
    assert "Results of the specification-curve" not in result.text
    assert result.report["captions"] == {"lines": 2, "kept_mid_sentence": 1}


# ------------------------------------------------------------------------------------------------------- references


def test_references_cut_until_appendix() -> None:
    body = "\n".join(f"Body sentence number {k} of the paper." for k in range(20))
    text = (
        f"{body}\nReferences\nSmith, J. (2019). A title. Journal, 1, 1-2.\nLee, K. (2020). Another. J, 2, 3-4.\n"
        "Appendix A\nThe appendix text is kept."
    )
    result = clean_pages(lines_from_text([text]), ONLY["references"])
    assert "Smith, J." not in result.text and "Lee, K." not in result.text
    assert "Body sentence number 19 of the paper." in result.text
    assert "The appendix text is kept." in result.text
    assert result.report["references"]["cut"] is True
    assert result.report["references"]["lines"] == 3


def test_references_word_early_in_text_is_not_a_cut() -> None:
    text = "References\n" + "\n".join(f"Body sentence {k}." for k in range(10))
    result = clean_pages(lines_from_text([text]), ONLY["references"])
    assert "Body sentence 9." in result.text and result.report["references"]["cut"] is False


# -------------------------------------------------------------------------------------------------------- citations


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We used support vector machines (SVM) here.", "We used support vector machines (SVM) here."),
        ("Bias is common (Smith et al., 2019).", "Bias is common."),
        ("Bias is common (Smith & Lee, 2020; Brown, 2018a) in groups.", "Bias is common in groups."),
        ("as shown before [12] and [3, 5-7].", "as shown before and."),
        ("Smith and Lee (2020) showed it.", "Smith and Lee showed it."),
        ("Jones et al. (2018, p. 12) argue so.", "Jones et al. argue so."),
        ("We used (SVM; Cortes & Vapnik, 1995) models.", "We used (SVM) models."),
        ("The sample (N = 120, 2 groups) was small.", "The sample (N = 120, 2 groups) was small."),
        ("Values in [0, 1] were kept (see Table 2).", "Values in [0, 1] were kept (see Table 2)."),
        ("Reviews exist (e.g., van der Toorn, Paunov, & Lee, 2019).", "Reviews exist."),
        ("Data from 2019 (in 2020) were used.", "Data from 2019 (in 2020) were used."),
        ("as seen in horses [6,10,15\u201320] and", "as seen in horses and"),
        ("Learning rate [200\u20131,500] and epochs", "Learning rate [200\u20131,500] and epochs"),  # values
        ("a span [12-3] of values", "a span [12-3] of values"),  # a citation range runs upward
        # the name's abbreviation ends the sentence: one period left (was "et al..")
        ("as done in Mikolov et al. (2013b). This method", "as done in Mikolov et al. This method"),
        ("as reported by Smith et al. [12]. We", "as reported by Smith et al. We"),
        ("as in Smith et al. (2013b), and", "as in Smith et al., and"),
    ],
)
def test_citations_removed_real_parentheses_kept(text: str, expected: str) -> None:
    assert strip_citations(text) == expected


# ------------------------------------------------------------------------------------------------------- page map


def test_apply_edits_moves_page_ranges() -> None:
    text = "aaaa XXXX bbbb cccc"
    pages = [(0, 10), (10, 19)]
    new_text, new_pages = apply_edits(text, pages, [(4, 9, ""), (14, 15, " - ")])
    assert new_text == "aaaa bbbb - cccc"
    assert new_pages == [(0, 5), (5, 16)]


def test_page_map_right_after_all_cleaning() -> None:
    pages = []
    for number in range(1, 5):
        pages.append(
            f"Running Head of the Journal\n"
            f"Sentence on page {number} opens here (Smith et al., 2019) and talks.\n"
            f"Another line on page {number} with a citation [4] and support vector machines (SVM).\n"
            f"{number}"
        )
    pages[-1] = pages[-1].replace("\n4", "\nReferences\nSmith, J. (2019). A title. J, 1, 1-2.\n4")
    result = clean_pages(lines_from_text(pages), CleaningOptions())
    document = Document(id="x", text=result.text, pages=result.pages)
    assert page_ranges_consistent(result.text, result.pages)
    assert len(result.pages) == 4
    for number in range(1, 5):
        at = result.text.index(f"Sentence on page {number}")
        assert document.page_at(at) == number
        start, end = result.pages[number - 1]
        chunk = result.text[start:end]
        assert f"page {number}" in chunk and all(f"page {k}" not in chunk for k in range(1, 5) if k != number)
    assert "Running Head" not in result.text and "(Smith" not in result.text and "[4]" not in result.text
    assert "Smith, J." not in result.text and "(SVM)" in result.text
    last_start, last_end = result.pages[-1]
    assert result.text[last_start:last_end].endswith("support vector machines (SVM).")
