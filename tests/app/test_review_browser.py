"""The review view in a real headless Chromium (`streamlit run app.py`): open a results spreadsheet with its papers,
mark an answer wrong and one correct, correct one, add a missed answer (and be refused one the paper does not
hold), then reload the page and continue: the coding is in the spreadsheet. Same browser setup as test_browser."""

from __future__ import annotations

import json
from pathlib import Path

from test_browser import browser, open_page, pytestmark, server, shots  # noqa: F401 - fixtures and skips
from test_review import TEXT, results_sheet

from mlpsych.app.review import ReviewSheet
from mlpsych.documents import Document


def open_review(page, sheet: Path, texts: Path) -> None:
    page.get_by_text("Continue a review (a coded spreadsheet and its papers)").click()  # open the expander
    for label, value in (("Coded spreadsheet (.xlsx)", sheet), ("Its papers (folder, texts.jsonl or text.json)",
                                                                 texts)):
        box = page.get_by_role("textbox", name=label, exact=True)
        box.fill(str(value))
        box.press("Enter")
        page.wait_for_timeout(300)
    page.get_by_role("button", name="Open the review", exact=True).click()
    page.get_by_text("each change is kept at once beside").wait_for()


ORDER = ["students", "caret", "random forests"]  # least sure first, as the page lists them


def mark(page, answer: str):
    """The "Correct?" choice of one answer."""
    return page.locator('[data-testid="stRadio"]', has_text="Correct?").nth(ORDER.index(answer))


def fix(page, answer: str):
    return page.get_by_role("textbox", name="Corrected answer").nth(ORDER.index(answer))


def test_review_mark_correct_add_reopen_in_chromium(server, browser, tmp_path, shots):  # noqa: F811
    sheet = results_sheet(tmp_path / "results.xlsx")
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "A", "text": TEXT, "pages": [[0, len(TEXT)]], "source_path": "/papers/A.pdf"}) + "\n")
    page = open_page(browser, server)
    open_review(page, sheet, texts)
    page.locator('[data-testid="stRadio"]', has_text="Correct?").nth(2).wait_for()  # all three answers shown
    strong = page.locator("strong").all_inner_texts()
    assert [s for s in strong if s in ("students", "caret", "random forests")] == ["students", "caret",
                                                                                  "random forests"]
    mark(page, "students").get_by_text("wrong", exact=True).click()
    page.get_by_text("1 of 3 answers of A coded").wait_for()  # saved: the paper's count follows
    mark(page, "random forests").get_by_text("correct", exact=True).click()
    page.get_by_text("2 of 3 answers of A coded").wait_for()
    box = fix(page, "caret")
    box.fill("the caret package")
    box.press("Enter")
    page.get_by_text("3 of 3 answers of A coded").wait_for()
    paste = page.get_by_role("textbox", name="Text of the paper")
    paste.fill("gradient boosting")
    page.get_by_role("button", name="Add the missed answer").click()
    page.get_by_text("is not in the text of A").wait_for()
    paste.fill("Support vector machines")
    page.get_by_role("button", name="Add the missed answer").click()
    page.get_by_text("Added to q1: Support vector machines").wait_for()
    page.screenshot(path=str(shots / "app-6-review.png"), full_page=True)

    items = {i.answer: i for i in ReviewSheet(sheet, {"A": Document("A", TEXT)}).items("A")}
    assert items["students"].correct is False and items["random forests"].correct is True
    assert items["caret"].corrected == "the caret package"
    assert items["Support vector machines"].stage == "coder" and items["Support vector machines"].page == 1

    page.reload()  # a new session: the review continues from the file
    page.get_by_role("heading", name="mlpsych: answers from papers").wait_for()
    open_review(page, sheet, texts)
    from playwright.sync_api import expect  # here: without Playwright the module's tests skip, not fail

    # the page fills in as the script's elements arrive: wait for the values (up to 30 s on a loaded machine)
    expect(mark(page, "students").get_by_role("radio", name="wrong")).to_be_checked(timeout=30_000)
    expect(fix(page, "caret")).to_have_value("the caret package", timeout=30_000)
    page.get_by_text("3 of 3 answers of A coded").wait_for()
