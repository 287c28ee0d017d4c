"""Reported statistics survive cleaning exactly as printed (issue 22, item 1): one case per pattern."""

from __future__ import annotations

import pytest

from mlpsych.ingest.base import lines_from_text
from mlpsych.ingest.clean import CleaningOptions, clean_pages
from mlpsych.ingest.statforms import check_statistics, find_statistics, without_overlaps

# Each form as a journal prints it (pdfium's characters: U+2212 minus, superscript two, Greek letters).
FORMS = [
    "t(34) = 2.10",
    "p = .041",
    "p < .001",
    "p > .05",
    "p ≤ .01",
    "d = 0.45",
    "r = .32",
    "r(186) = −.213",
    "AUC of .71",
    "χ²(2) = 5.3",
    "F(1, 98) = 4.2",
    "η²p = .05",
    "β = −.21",
    "β = −0.15",
    "B = -0.059",
    "OR = 1.8",
    "R² = .41",
    "M = 83.3",
    "κ ≈ 2.2",
]
INTERVALS = ["[.12, .56]", "[−0.31, 0.08]", "[2, 5]"]


@pytest.mark.parametrize("form", FORMS)
def test_each_form_is_found_with_its_label(form: str) -> None:
    found = find_statistics(f"In Study 2, {form}, as predicted.")
    assert [f.text for f in found] == [form]


def test_interval_forms_and_numbered_citations_told_apart() -> None:
    text = "the effect (95% CI [.12, .56]) and [−0.31, 0.08] and 95% CI [2, 5], as before [12] or [1, 3]."
    assert [f.text for f in find_statistics(text)] == INTERVALS


@pytest.mark.parametrize("form", FORMS + [f"95% CI {i}" for i in INTERVALS])
def test_each_form_survives_all_cleaning_beside_citations(form: str) -> None:
    # Citations on either side and a line break inside the form: the citation goes, the statistic stays as printed.
    broken = form.replace(" ", "\n", 1) if form.count(" ") else form
    text = (
        "Groups differed in the predicted direction (Smith & Lee, 2019), "
        f"{broken} (Walker, 2015), and the effect held [12]. Next sentence of the paragraph follows here."
    )
    out = clean_pages(lines_from_text([text]), CleaningOptions()).text
    assert form in out
    assert "Smith" not in out and "Walker" not in out and "[12]" not in out


@pytest.mark.parametrize("squeezed", ["p <.001", "r =.32", "AUC of.71", "p = .041.", "d = 0.45,"])
def test_space_tidying_never_squeezes_a_decimal(squeezed: str) -> None:
    form = squeezed.replace("<.", "< .").replace("=.", "= .").replace("of.", "of .").rstrip(".,")
    text = f"The result (Smith, 2019) was {form} (Lee, 2018) for all groups."
    out = clean_pages(lines_from_text([text]), CleaningOptions()).text
    assert out == f"The result was {form} for all groups."


def test_superscripts_and_minus_kept_while_ligatures_normalized() -> None:
    text = "The \ufb01nal model: \u03c7\u00b2(2) = 5.3, \u03b7\u00b2p = .05, \u03b2 = \u2212.21, H\u2082O."
    out = clean_pages(lines_from_text([text]), CleaningOptions()).text
    assert out == "The final model: χ²(2) = 5.3, η²p = .05, β = −.21, H₂O."


def test_overlapping_edits_dropped_others_kept() -> None:
    text = "x (A, 2019) p < .001 y"
    spans = [(f.start, f.end) for f in find_statistics(text)]
    edits = [(1, 11, ""), (14, 15, ""), (20, 20, "!"), (17, 17, "!")]
    kept, dropped = without_overlaps(edits, spans)
    assert kept == [(1, 11, ""), (20, 20, "!")] and dropped == 2


def test_check_statistics_tells_squeezed_from_removed() -> None:
    raw = "We found p < .001 and χ²(2) = 5.3 here.\nTable 1. Cells -7.53 <0.001 in the table."
    good = check_statistics(raw, "We found p < .001 and χ²(2) = 5.3 here.")
    assert good.expected == ["p < .001", "χ²(2) = 5.3"] and good.missing == [] and good.removed == 1
    bad = check_statistics(raw, "We found p <.001 and χ2(2) = 5.3 here.")
    assert bad.missing == ["p < .001", "χ²(2) = 5.3"] and bad.kept == 0
