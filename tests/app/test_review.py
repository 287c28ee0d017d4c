"""The review view's logic: least-sure first, marks, corrections, added answers placed in the paper, autosave,
reopening, a second coder's columns for `mlpsych agree`, and the coding read back by `mlpsych adapt`."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlpsych.answers import Answer
from mlpsych.app.review import ReviewSheet, coder_columns
from mlpsych.coding.coded import coding_from_sheets
from mlpsych.documents import Document
from mlpsych.errors import AppInputError
from mlpsych.evaluation.agree import kappa_table, read_codings
from mlpsych.export import write_result
from mlpsych.pipeline import RunResult
from mlpsych.ingest import write_jsonl
from mlpsych.questions import load_question_set

TEXT = ("Participants were 120 students. We used random forests to predict dropout. Models were fitted in R with "
        "the caret package. Support vector machines served as a baseline.")


def shown(markdown: str) -> str:
    """Markdown of the page (an alert, a caption) as the browser shows it: its text, escapes resolved."""
    import html
    import re

    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark").enable("strikethrough")
    return html.unescape(re.sub(r"<[^>]+>", "", render.render(markdown))).strip()


def results_sheet(path: Path) -> Path:
    """A results workbook as `mlpsych run` writes it: three answers of one paper, with confidences."""
    doc = Document("A", TEXT, pages=[(0, len(TEXT))], source_path="/papers/A.pdf")
    questions = load_question_set("mlpsych").select(["q1", "q2"])

    def answer(q: str, text: str, confidence: float) -> Answer:
        start = TEXT.index(text)
        return Answer("A", q, text, "extractive", ["m"], 0.5, start, start + len(text), 1,
                      doc.sentence_around(start, start + len(text)), final=True, confidence=confidence)

    result = RunResult([doc], questions, [answer("q1", "random forests", 0.8), answer("q1", "students", 0.1),
                                          answer("q2", "caret", 0.5)])
    return write_result(result, path)


@pytest.fixture
def sheet_path(tmp_path: Path) -> Path:
    return results_sheet(tmp_path / "results.xlsx")


@pytest.fixture
def documents() -> dict[str, Document]:
    return {"A": Document("A", TEXT, pages=[(0, len(TEXT))], source_path="/papers/A.pdf")}


def test_least_sure_first_then_mark_correct_add_and_reopen(sheet_path: Path, documents):
    review = ReviewSheet(sheet_path, documents)
    assert review.papers() == ["A"]
    items = review.items("A")
    assert [i.answer for i in items] == ["students", "caret", "random forests"]
    assert all(not i.coded and i.evidence for i in items)
    review.mark(items[0].row, False)
    review.mark(items[2].row, True)
    assert review.correct_to(items[1].row, "the caret package")
    assert not review.correct_to(items[1].row, "caret 6.0")  # saved, but not in the paper: adapt will skip it
    review.correct_to(items[1].row, "the caret package")
    review.note(items[1].row, "the package, not the function")
    row = review.add("A", "q1", "Support  vector machines")
    with pytest.raises(AppInputError, match="is not in the text of A"):
        review.add("A", "q1", "gradient boosting")
    assert review.coded_count("A") == (3, 3)

    again = ReviewSheet(sheet_path, documents)  # autosaved: a new session continues where this one stopped
    items = {i.answer: i for i in again.items("A")}
    assert items["students"].correct is False and items["random forests"].correct is True
    assert items["caret"].corrected == "the caret package" and items["caret"].notes == "the package, not the function"
    added = items["Support vector machines"]
    assert added.row == row and added.stage == "coder" and added.correct is True and added.page == 1
    assert "baseline" in added.evidence
    start = TEXT.index("Support vector machines")
    coding = coding_from_sheets([sheet_path], documents)  # what `mlpsych adapt --coded` learns from it
    positives = {(s.text, s.how) for s in coding.spans if s.correct}
    assert positives == {("random forests", "accepted"), ("the caret package", "corrected"),
                         ("Support vector machines", "added")}
    assert any(s.start == start and s.how == "added" for s in coding.spans)
    # caret, corrected and left unmarked, was not right (as `mlpsych agree` and `calibrate` count it)
    assert {(s.text, s.how) for s in coding.spans if not s.correct} == {("students", "wrong"), ("caret", "wrong")}


def test_an_answer_pasted_from_the_pdf_is_added_where_the_paper_has_it(sheet_path: Path, documents):
    """A coder copies a missed answer out of the PDF viewer: the copy keeps the PDF's "\ufb01" ligature, its soft
    hyphens and a word broken at a line's end ("ma-" newline "chines"), which ingest had made "fi", nothing and
    "machines" in the paper's text. Such an answer was refused as "not in the text" (a correction was saved as not
    in the paper, and `mlpsych adapt` skipped it)."""
    review = ReviewSheet(sheet_path, documents)
    pasted = {"Models were \ufb01tted in R": "Models were fitted in R",
              "Support vector ma-\nchines": "Support vector machines",
              "base\u00adline": "baseline"}
    for copy, printed in pasted.items():
        row = review.add("A", "q1", copy)
        start = TEXT.index(printed)
        assert (review._get(row, "answer"), review._get(row, "start")) == (printed, start)
        assert review.correct_to(row, copy)
    coding = coding_from_sheets([sheet_path], documents)
    assert {s.text for s in coding.spans if s.how == "corrected"} == set(pasted.values())
    assert not coding.skipped
    with pytest.raises(AppInputError, match="is not in the text of A"):
        review.add("A", "q1", "vector ma-\nchine learning")  # a line-end hyphen joins words only where they are


def test_a_second_coder_writes_own_columns_and_agree_compares_them(sheet_path: Path, documents):
    first = ReviewSheet(sheet_path, documents)
    for item in first.items("A"):
        first.mark(item.row, item.answer != "students")
    second = ReviewSheet(sheet_path, documents, coder="2")
    assert [i.correct for i in second.items("A")] == [None, None, None]  # the second coder starts blank
    for item in second.items("A"):
        second.mark(item.row, item.answer == "random forests")
    codings, coders = read_codings(sheet_path)
    assert coders == ["correct", "correct_2"]
    overall = next(k for k in kappa_table(codings, coders) if k.question == "all")
    assert overall.n == 3 and overall.agreement == pytest.approx(2 / 3)


def _choices(path: Path, column: str) -> list[str]:
    """The list a coder picks from in Excel on the answers sheet's ``column``, if any."""
    from openpyxl import load_workbook

    sheet = load_workbook(path)["answers"]
    letter = next(c.column_letter for c in sheet[1] if c.value == column)
    return [v.formula1 for v in sheet.data_validations.dataValidation
            if v.type == "list" and any(str(r).startswith(f"{letter}2:{letter}") for r in v.sqref.ranges)]


def test_coders_in_excel_pick_yes_or_no_and_the_app_keeps_that(sheet_path: Path, documents):
    """A coder marking in Excel picks the app's marks from a list; the workbook the review writes (when the coder
    leaves a paper) keeps the list, and a second coder's column gets its own."""
    assert _choices(sheet_path, "correct") == ['"yes,no"']
    second = ReviewSheet(sheet_path, documents, coder="2")
    second.mark(second.items("A")[0].row, True)
    second.save()
    assert _choices(sheet_path, "correct") == ['"yes,no"'] and _choices(sheet_path, "correct_2") == ['"yes,no"']
    read_codings(sheet_path)  # still what `mlpsych agree` reads


def test_refusals(tmp_path: Path, sheet_path: Path, documents):
    with pytest.raises(AppInputError, match="no such spreadsheet"):
        ReviewSheet(tmp_path / "none.xlsx", documents)
    with pytest.raises(AppInputError, match="not among the papers given: A"):
        ReviewSheet(sheet_path, {"B": Document("B", "other")})
    with pytest.raises(AppInputError, match="letters, digits"):
        coder_columns("a b")
    bad = tmp_path / "bad.xlsx"
    bad.write_text("not a workbook")
    with pytest.raises(AppInputError, match="cannot open as a workbook"):
        ReviewSheet(bad, documents)


def follow_up_sheet(path: Path) -> Path:
    """A results workbook with q1's techniques and q4's follow-up answers about each of them."""
    doc = Document("A", TEXT, pages=[(0, len(TEXT))], source_path="/papers/A.pdf")

    def answer(q: str, text: str, about: str | None = None) -> Answer:
        start = TEXT.index(text)
        return Answer("A", q, text, "extractive", ["m"], 0.5, start, start + len(text), 1,
                      doc.sentence_around(start, start + len(text)), final=True, confidence=0.5, bridge_entity=about)

    answers = [answer("q1", "random forests"), answer("q1", "Support vector machines"),
               answer("q4", "students", "random forests"), answer("q4", "caret", "Support vector machines")]
    return write_result(RunResult([doc], load_question_set("mlpsych").select(["q1", "q4"]), answers), path)


def test_an_added_follow_up_answer_is_about_the_entity_chosen_or_mentioned_nearest(tmp_path: Path, documents):
    """A missed q4 answer used to be added about no technique (a blank bridge entity in the sheet)."""
    path = follow_up_sheet(tmp_path / "results.xlsx")
    review = ReviewSheet(path, documents)
    assert sorted(review.entities("A")) == ["Support vector machines", "random forests"]
    assert review.entities("A", "q1") == []
    nearest = review.add("A", "q4", "predict dropout")  # in the sentence of "random forests"
    chosen = review.add("A", "q4", "a baseline", "random forests")  # the coder says which
    plain = review.add("A", "q1", "caret")  # not a follow-up: about nothing, whatever is chosen
    about = {i.row: i.bridge_entity for i in ReviewSheet(path, documents).items("A")}
    assert (about[nearest], about[chosen], about[plain]) == ("random forests", "random forests", None)
    assert review.add("A", "q4", "served as a baseline") and \
        ReviewSheet(path, documents).items("A")[-1].bridge_entity == "Support vector machines"
    spans = {(s.question_id, s.text): s.bridge_entity for s in coding_from_sheets([path], documents).spans}
    assert spans[("q4", "predict dropout")] == "random forests"  # what `mlpsych adapt --coded` asks about


# ------------------------------------------------------------- each change kept at once, the workbook written later


def _crash(path: Path, code: str, killed: bool = True) -> None:
    """``code`` run on a review of ``path`` in another Python, which then dies without any clean-up (a crash, a
    killed app): what it left on disk is all there is. ``killed`` False: it ends as a stopped app's Python does."""
    import subprocess
    import sys

    script = ("import os\nfrom mlpsych.app.review import ReviewSheet\nfrom mlpsych.documents import Document\n"
              f"review = ReviewSheet({str(path)!r}, {{'A': Document('A', {TEXT!r}, pages=[(0, {len(TEXT)})])}})\n"
              "items = {i.answer: i.row for i in review.items('A')}\n" + code
              + ("\nos._exit(9)\n" if killed else "\n"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == (9 if killed else 0), done.stderr


def _written_cells(path: Path) -> dict[str, tuple]:
    """The workbook file's own coder cells per answer (read without the changes kept beside it)."""
    from openpyxl import load_workbook

    rows = load_workbook(path, read_only=True)["answers"].iter_rows(values_only=True)
    header = list(next(rows))
    at = {name: header.index(name) for name in ("answer", "correct", "corrected_answer")}
    return {row[at["answer"]]: (row[at["correct"]], row[at["corrected_answer"]]) for row in rows}


def _until(done, seconds: float = 30.0) -> bool:
    """Whether ``done()`` comes true within ``seconds`` (a timer thread's work)."""
    import time

    end = time.monotonic() + seconds
    while not done():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_the_workbook_takes_the_coding_a_while_after_the_last_change_without_leaving_the_paper(sheet_path: Path,
                                                                                              documents):
    """A coder who closed the tab on a paper (or mailed the workbook) left its coding out of the workbook: only
    moving to another paper wrote it. It is written once the coding has rested, each change starting the wait
    again, and the changes file is gone."""
    from mlpsych.journal import journal_path

    review = ReviewSheet(sheet_path, documents, idle_write=0.5)
    rows = {i.answer: i.row for i in review.items("A")}
    review.mark(rows["students"], False)
    review.correct_to(rows["caret"], "the caret package")
    assert journal_path(sheet_path).is_file() and _written_cells(sheet_path)["students"] == (None, None)
    assert _until(lambda: not journal_path(sheet_path).exists())
    assert _written_cells(sheet_path) == {"random forests": (None, None), "students": ("no", None),
                                          "caret": (None, "the caret package")}
    assert not review.pending and review.idle_error == ""


def test_a_write_after_the_last_change_that_fails_is_said_on_the_page(sheet_path: Path, documents):
    """The workbook's file unwritable when no one waits for the write (here a folder in its place): the failure is
    kept for the page to say, and the coding stays on the page and beside the workbook for the next save."""
    from mlpsych.journal import journal_path

    review = ReviewSheet(sheet_path, documents, idle_write=2.0)
    review.mark(review.items("A")[0].row, True)  # kept beside the workbook; then the file cannot be written
    sheet_path.unlink()
    sheet_path.mkdir()
    assert _until(lambda: review.idle_error != "")
    assert review.idle_error.startswith(f"Not saved in {sheet_path}") and review.unsaved
    assert journal_path(sheet_path).is_file()


def test_coding_still_due_is_written_when_the_app_stops(sheet_path: Path):
    """An app stopped (Ctrl-C) before the write was due: its Python writes the workbook as it exits."""
    from mlpsych.journal import journal_path

    _crash(sheet_path, "review.mark(items['students'], False)", killed=False)
    assert _written_cells(sheet_path)["students"] == ("no", None) and not journal_path(sheet_path).exists()


def test_a_mark_writes_no_workbook_and_survives_a_crash_for_the_review_and_agree(sheet_path: Path, documents):
    """Each mark wrote the whole workbook (30 s a mark at 1,000 papers): it is kept beside it at once, and a review
    killed between marks loses none of them: the review reopens with them, `mlpsych agree`, `adapt` and a rerun's
    check for coding read them, and the workbook takes them when the coder leaves the paper."""
    from mlpsych.cli.run_cmd import check_not_coded
    from mlpsych.errors import UserError
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.journal import journal_path

    written = sheet_path.read_bytes()
    _crash(sheet_path, "review.mark(items['students'], False)\nreview.mark(items['random forests'], True)\n"
                       "review.correct_to(items['caret'], 'the caret package')\nreview.add('A', 'q1', 'baseline')")
    assert sheet_path.read_bytes() == written  # no workbook written per change
    assert journal_path(sheet_path).is_file()

    marks = {i.answer: (i.correct, i.corrected) for i in ReviewSheet(sheet_path, documents).items("A")}
    assert marks == {"students": (False, ""), "random forests": (True, ""), "caret": (None, "the caret package"),
                     "baseline": (True, "")}
    codings, coders = read_codings(sheet_path)  # `mlpsych agree`
    assert coders == ["correct"] and sorted(c.marks["correct"] for c in codings) == [False, False, True]
    spans = {(s.text, s.how) for s in coding_from_sheets([sheet_path], documents).spans}  # `mlpsych adapt`
    assert {("baseline", "added"), ("the caret package", "corrected"), ("students", "wrong")} <= spans
    with pytest.raises(UserError, match="4 of its answers are coded"):  # a rerun does not write over them
        check_not_coded(sheet_path)

    review = ReviewSheet(sheet_path, documents)
    review.note(review.items("A")[0].row, "checked")
    review.save()  # the coder leaves the paper: the workbook holds it all, and nothing is kept beside it
    assert not journal_path(sheet_path).exists()
    from openpyxl import load_workbook

    cells = list(load_workbook(sheet_path, read_only=True)["answers"].iter_rows(values_only=True))  # as Excel shows it
    header = cells[0]
    assert sorted(str(r[header.index("correct")]) for r in cells[1:]) == ["None", "no", "yes", "yes"]
    assert [r["answer"] for r in read_sheet(sheet_path, "answers")] == ["random forests", "students", "caret",
                                                                        "baseline"]


def test_a_crash_while_the_workbook_is_written_loses_and_repeats_nothing(sheet_path: Path, documents):
    """Killed while the workbook is written: before the new one replaces it, the changes kept beside it still
    apply; after, they are in it and are not applied twice (an added answer once, not twice)."""
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.journal import journal_path

    _crash(sheet_path, "review.mark(items['students'], False)\nreview.add('A', 'q1', 'baseline')\n"
                       "import os\nos.replace = lambda *a: os._exit(9)\nreview.save()")  # dies before the rename
    assert [r["answer"] for r in read_sheet(sheet_path, "answers")][-1] == "baseline"
    _crash(sheet_path, "review.mark(items['caret'], True)\nreview.journal.clear = lambda: os._exit(9)\n"
                       "review.save()")  # dies after the rename, the kept changes not yet removed
    assert journal_path(sheet_path).is_file()
    rows = read_sheet(sheet_path, "answers")
    assert [(r["answer"], r["correct"]) for r in rows] == [("random forests", None), ("students", "no"),
                                                          ("caret", "yes"), ("baseline", "yes")]
    review = ReviewSheet(sheet_path, documents)
    assert not journal_path(sheet_path).exists() and len(review.items("A")) == 4


def _saved_elsewhere(path: Path, edit=lambda answers: None) -> None:
    """``path`` opened and saved again as Excel would (``edit`` done to its answers sheet first): its bytes, so its
    SHA-256, change even when its cells do not (openpyxl saving an unchanged workbook within the second it was
    written gives the same bytes, so the document's properties are changed as Excel changes them)."""
    from openpyxl import load_workbook

    before = path.read_bytes()
    book = load_workbook(path)
    edit(book["answers"])
    book.properties.lastModifiedBy = "Microsoft Excel"
    book.save(path)
    assert path.read_bytes() != before


def _sorted_by_answer(answers) -> None:
    """Excel's Data > Sort on the answer column: the rows' cells move, the row numbers stay."""
    rows = [[cell.value for cell in row] for row in answers.iter_rows(min_row=2)]
    column = [cell.value for cell in answers[1]].index("answer")
    for number, values in enumerate(sorted(rows, key=lambda r: str(r[column])), start=2):
        for index, value in enumerate(values, start=1):
            answers.cell(row=number, column=index).value = value  # cell(value=None) would leave the cell as it was


def _coding(rows) -> dict[str, tuple]:
    return {r["answer"]: (r["correct"], r["corrected_answer"]) for r in rows}


CODED = {"students": ("no", None), "random forests": ("yes", None), "caret": (None, "the caret package"),
         "baseline": ("yes", None)}
CRASHED = ("review.mark(items['students'], False)\nreview.mark(items['random forests'], True)\n"
           "review.correct_to(items['caret'], 'the caret package')\nreview.add('A', 'q1', 'baseline')")


@pytest.mark.parametrize("edit", [lambda answers: None, _sorted_by_answer], ids=["saved again", "sorted"])
def test_changes_kept_apply_to_the_workbook_saved_again_or_sorted_elsewhere(sheet_path: Path, documents, caplog,
                                                                            edit):
    """The coder stopped with marks kept beside the workbook, then opened it in Excel and saved it (or sorted it,
    or a sync tool rewrote it): its SHA-256 changed, and every kept change was set aside, to be made again. Each
    change finds its answer's row by its content, sorted or not, and applies: for `mlpsych agree` and `adapt`, in
    the review, and in the workbook once written."""
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.journal import journal_path

    _crash(sheet_path, CRASHED)
    _saved_elsewhere(sheet_path, edit)
    assert _coding(read_sheet(sheet_path, "answers")) == CODED
    assert "not applied" not in caplog.text
    spans = {(s.text, s.how) for s in coding_from_sheets([sheet_path], documents).spans}  # `mlpsych adapt`
    assert {("random forests", "accepted"), ("the caret package", "corrected"), ("baseline", "added"),
            ("students", "wrong")} <= spans

    review = ReviewSheet(sheet_path, documents)
    assert review.notice == "" and not list(sheet_path.parent.glob("*not-applied*"))
    assert {i.answer: (i.correct, i.corrected) for i in review.items("A")} == {
        "students": (False, ""), "random forests": (True, ""), "caret": (None, "the caret package"),
        "baseline": (True, "")}
    review.note(review.items("A")[0].row, "checked")
    review.save()
    assert not journal_path(sheet_path).exists() and review.notice == ""
    rows = read_sheet(sheet_path, "answers")  # the workbook itself holds them now
    assert _coding(rows) == CODED and [r["notes"] for r in rows].count("checked") == 1


def test_only_changes_whose_answer_is_gone_or_cells_changed_elsewhere_are_set_aside(sheet_path: Path, documents,
                                                                                   caplog):
    """In Excel, after the coder stopped, the caret answer was deleted and another coder marked "students" right:
    those two kept changes conflict and are set aside (kept, and said once: how many, and where), the others
    apply."""
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.journal import journal_path

    def edited(answers) -> None:
        header = [cell.value for cell in answers[1]]
        answers.cell(row=3, column=header.index("correct") + 1, value="yes")  # students, marked elsewhere
        assert answers.cell(row=4, column=header.index("answer") + 1).value == "caret"
        answers.delete_rows(4)

    _crash(sheet_path, CRASHED)
    _saved_elsewhere(sheet_path, edited)
    expected = {"random forests": ("yes", None), "students": ("yes", None), "baseline": ("yes", None)}
    assert _coding(read_sheet(sheet_path, "answers")) == expected
    assert ("2 change(s) made in the review were not applied to results.xlsx" in caplog.text
            and str(journal_path(sheet_path)) in caplog.text)

    review = ReviewSheet(sheet_path, documents)
    aside = sheet_path.with_name("results-changes-not-applied-1.jsonl")
    assert review.notice.startswith("2 change(s) made in the review were not applied") and str(aside) in review.notice
    lines = aside.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and '"the caret package"' in lines[2] and '"no"' in lines[1]  # the workbook's line first
    assert {i.answer: i.correct for i in review.items("A")} == {"random forests": True, "students": True,
                                                               "baseline": True}
    caplog.clear()
    assert _coding(read_sheet(sheet_path, "answers")) == expected and "not applied" not in caplog.text
    review.save()
    assert not journal_path(sheet_path).exists() and aside.is_file()
    assert _coding(read_sheet(sheet_path, "answers")) == expected


def test_changes_kept_that_the_workbook_saved_again_already_holds_apply_once(sheet_path: Path, documents):
    """A review died after writing the workbook, before removing the changes kept beside it, and the workbook was
    then saved again elsewhere: its cells hold the changes, which are neither set aside nor applied twice."""
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.journal import journal_path

    _crash(sheet_path, CRASHED + "\nreview.mark(items['students'], True)\nreview.mark(items['students'], None)\n"
                                 "review.journal.clear = lambda: os._exit(9)\nreview.save()")
    _saved_elsewhere(sheet_path)
    assert journal_path(sheet_path).is_file()
    coded = CODED | {"students": (None, None)}
    assert _coding(read_sheet(sheet_path, "answers")) == coded
    review = ReviewSheet(sheet_path, documents)
    assert review.notice == "" and len(review.items("A")) == 4
    assert not list(sheet_path.parent.glob("*not-applied*"))


def test_changes_kept_by_an_earlier_version_apply_by_row_number_to_their_workbook_only(sheet_path: Path,
                                                                                      documents):
    """A file of kept changes written before they named their rows' content (row numbers only) applies to the
    very workbook it was made on, as it did; on one saved elsewhere since it is set aside whole."""
    import json

    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.journal import file_hash, journal_path

    lines = [{"workbook": sheet_path.name, "sha256": file_hash(sheet_path)}, {"row": 3, "set": {"correct": "no"}}]
    journal_path(sheet_path).write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert _coding(read_sheet(sheet_path, "answers"))["students"] == ("no", None)
    _saved_elsewhere(sheet_path, _sorted_by_answer)
    assert _coding(read_sheet(sheet_path, "answers"))["students"] == (None, None)
    review = ReviewSheet(sheet_path, documents)
    assert review.notice.startswith("1 change(s) made in ") and "were not applied" in review.notice
    assert not journal_path(sheet_path).exists()
    assert sheet_path.with_name("results-changes-not-applied-1.jsonl").read_text(encoding="utf-8").splitlines() == [
        json.dumps(line) for line in lines]


def test_a_mark_taken_back_leaves_the_workbook_cell_blank(sheet_path: Path, documents):
    """A mark set back to "not coded", a correction or note cleared: the written workbook kept the old cell (the
    review set a cell with openpyxl's ``cell(value=None)``, which sets nothing), and the coder's change was lost
    once the changes kept beside it were removed."""
    from mlpsych.evaluation.evaluate import read_sheet

    review = ReviewSheet(sheet_path, documents)
    row = review.items("A")[0].row
    review.mark(row, True)
    review.correct_to(row, "120 students")
    review.note(row, "unsure")
    review.save()
    review.mark(row, None)
    review.correct_to(row, "")
    review.note(row, "")
    review.save()
    cells = next(r for r in read_sheet(sheet_path, "answers") if r["_row"] == row)
    assert (cells["correct"], cells["corrected_answer"], cells["notes"]) == (None, None, None)


def test_a_review_leaving_its_paper_keeps_another_coders_changes(sheet_path: Path, documents):
    """Two coders in two sessions on one workbook: the first one's workbook, written when it left the paper, took
    the second's marks made meanwhile along (each write was of its own session's coding, and wrote over the
    other's)."""
    first = ReviewSheet(sheet_path, documents)
    second = ReviewSheet(sheet_path, documents, coder="2")
    for item in first.items("A"):
        first.mark(item.row, item.answer != "students")
    for item in second.items("A"):
        second.mark(item.row, item.answer == "random forests")
    first.save()
    codings, coders = read_codings(sheet_path)
    assert coders == ["correct", "correct_2"]
    assert sorted((c.marks["correct"], c.marks["correct_2"]) for c in codings) == [
        (False, False), (True, False), (True, True)]


def test_a_review_writing_after_another_one_wrote_keeps_that_ones_coding(sheet_path: Path, documents):
    """Two sessions on one workbook, each leaving its paper in turn: the second one's write was of the workbook as
    it had read it, so it wrote over the coding the first one had written meanwhile (its marks, and the second's own
    made before the first one's write, which that write had taken in)."""
    first = ReviewSheet(sheet_path, documents)
    second = ReviewSheet(sheet_path, documents, coder="2")
    rows = {item.answer: item.row for item in first.items("A")}
    first.mark(rows["students"], False)
    second.mark(rows["students"], True)
    first.save()
    second.mark(rows["caret"], False)
    first.mark(rows["caret"], True)
    second.save()
    from mlpsych.evaluation.evaluate import read_sheet

    marks = {r["answer"]: (r["correct"], r["correct_2"]) for r in read_sheet(sheet_path, "answers")}
    assert marks == {"students": ("no", "yes"), "caret": ("yes", "no"), "random forests": (None, None)}


@pytest.mark.parametrize("edit", [lambda answers: None, _sorted_by_answer], ids=["saved again", "sorted"])
def test_a_workbook_changed_in_excel_during_the_review_keeps_those_changes_and_the_reviews(sheet_path: Path,
                                                                                          documents, edit):
    """A coder (or a colleague) edited and saved the workbook in Excel while the review was open: the review's next
    write was of the workbook as it had read it, and the Excel edits were lost."""
    from mlpsych.evaluation.evaluate import read_sheet

    review = ReviewSheet(sheet_path, documents)
    rows = {item.answer: item.row for item in review.items("A")}
    review.mark(rows["students"], False)

    def in_excel(answers) -> None:
        header = [cell.value for cell in answers[1]]
        if "notes" not in header:
            answers.cell(row=1, column=len(header) + 1, value="notes")
            header.append("notes")
        answers.cell(row=rows["random forests"], column=header.index("notes") + 1, value="seen in Excel")
        edit(answers)

    _saved_elsewhere(sheet_path, in_excel)
    review.mark(rows["caret"], True)
    review.save()
    cells = {r["answer"]: (r["correct"], r["notes"]) for r in read_sheet(sheet_path, "answers")}
    assert cells == {"students": ("no", None), "caret": ("yes", None), "random forests": (None, "seen in Excel")}
    assert review.notice == ""


def test_a_workbook_changed_elsewhere_that_cannot_take_the_coding_is_kept_aside(sheet_path: Path, documents):
    """Its answers sheet renamed in Excel during the review: the review writes its coding over it, and keeps that
    version beside it, said."""
    from openpyxl import load_workbook

    from mlpsych.evaluation.evaluate import read_sheet

    review = ReviewSheet(sheet_path, documents)
    row = review.items("A")[0].row
    review.mark(row, True)
    _saved_elsewhere(sheet_path, lambda answers: setattr(answers, "title", "answers (old)"))
    review.save()
    aside = sheet_path.with_name("results-changed-elsewhere-1.xlsx")
    assert "answers (old)" in load_workbook(aside).sheetnames and aside.name in review.notice
    assert next(r for r in read_sheet(sheet_path, "answers") if r["_row"] == row)["correct"] == "yes"


def test_a_copy_aside_cut_short_leaves_no_copy_and_the_workbook_unwritten(sheet_path: Path, documents, monkeypatch):
    """The disk full while the version written elsewhere was copied aside: half a copy was left under the name the
    notice would give, to be trusted as that version. Now none is left, the workbook is not written over (the
    coding stays on the page, said), and the next save keeps a whole copy."""
    import errno

    from openpyxl import load_workbook

    review = ReviewSheet(sheet_path, documents)
    review.mark(review.items("A")[0].row, True)
    _saved_elsewhere(sheet_path, lambda answers: setattr(answers, "title", "answers (old)"))
    elsewhere = sheet_path.read_bytes()
    write_bytes = Path.write_bytes

    def disk_full(path: Path, data: bytes) -> int:
        if "changed-elsewhere" in path.name:
            write_bytes(path, data[:len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_bytes(path, data)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "write_bytes", disk_full)
        with pytest.raises(AppInputError, match="Not saved"):
            review.save()
    assert [p.name for p in sheet_path.parent.iterdir() if "changed-elsewhere" in p.name] == []
    assert sheet_path.read_bytes() == elsewhere and review.unsaved
    review.save()
    aside = sheet_path.with_name("results-changed-elsewhere-1.xlsx")
    assert aside.read_bytes() == elsewhere and "answers (old)" in load_workbook(aside).sheetnames


# ------------------------------------------------------------------------------------------- the page (AppTest)

APP = Path(__file__).resolve().parents[2] / "app.py"


def open_in_page(sheet: Path, texts: Path, coder: str = ""):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.text_input(key="review_open_path").input(str(sheet))
    at.text_input(key="review_open_papers").input(str(texts))
    at.text_input(key="review_coder").input(coder)
    at.button(key="review_open").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def answers_shown(at) -> list[str]:
    return [m.value.split("**")[1] for m in at.markdown if m.value.startswith("**") and " · q" in m.value]


def test_page_review_mark_correct_add_and_reopen(tmp_path: Path, sheet_path: Path):
    pytest.importorskip("streamlit")
    import json

    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "A", "text": TEXT, "source_path": "/papers/A.pdf"}) + "\n")
    at = open_in_page(sheet_path, texts)
    assert answers_shown(at) == ["students", "caret", "random forests"]  # least sure first
    rid = at.session_state["review_id"]
    rows = {i.answer: i.row for i in ReviewSheet(sheet_path, {"A": Document("A", TEXT)}).items("A")}
    at.radio(key=f"mark:{rid}:{rows['students']}").set_value("wrong").run()
    at.radio(key=f"mark:{rid}:{rows['random forests']}").set_value("correct").run()
    at.text_input(key=f"fix:{rid}:{rows['caret']}").input("caret 6.0").run()
    assert any("not in the paper's text" in w.value for w in at.warning)
    at.text_input(key=f"fix:{rid}:{rows['caret']}").input("the caret package").run()
    at.text_area(key=f"add_text:{rid}").input("gradient boosting")
    next(b for b in at.button if b.label == "Add the missed answer").click().run()
    assert any("is not in the text of A" in e.value for e in at.error)
    at.text_area(key=f"add_text:{rid}").input("Support vector machines")
    next(b for b in at.button if b.label == "Add the missed answer").click().run()
    assert not at.exception and any("Added to q1" in s.value for s in at.success)
    assert "Support vector machines" in answers_shown(at)
    assert "A (3 of 3 coded)" in at.selectbox(key=f"review_paper:{rid}").options

    reopened = open_in_page(sheet_path, texts)  # a new session continues the coding from the file
    rid = reopened.session_state["review_id"]
    assert reopened.radio(key=f"mark:{rid}:{rows['students']}").value == "wrong"
    assert reopened.radio(key=f"mark:{rid}:{rows['random forests']}").value == "correct"
    assert reopened.text_input(key=f"fix:{rid}:{rows['caret']}").value == "the caret package"
    second = open_in_page(sheet_path, texts, coder="2")  # a second coder starts blank in their own columns
    rid = second.session_state["review_id"]
    assert second.radio(key=f"mark:{rid}:{rows['students']}").value == "not coded"
    assert any("mlpsych adapt --reader" in c.value for c in second.code)


def test_page_adds_a_follow_up_answer_about_the_technique_chosen(tmp_path: Path):
    pytest.importorskip("streamlit")
    import json

    path = follow_up_sheet(tmp_path / "results.xlsx")
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "A", "text": TEXT, "source_path": "/papers/A.pdf"}) + "\n")
    at = open_in_page(path, texts)
    rid = at.session_state["review_id"]
    at.selectbox(key=f"add_q:{rid}").set_value("q4")
    at.selectbox(key=f"add_about:{rid}").set_value("Support vector machines")
    at.text_area(key=f"add_text:{rid}").input("predict dropout")
    next(b for b in at.button if b.label == "Add the missed answer").click().run()
    assert not at.exception and any("Added to q4 about Support vector machines: predict dropout" in s.value for s in at.success), \
        [s.value for s in at.success]
    added = ReviewSheet(path, {"A": Document("A", TEXT)}).items("A")[-1]
    assert (added.answer, added.bridge_entity) == ("predict dropout", "Support vector machines")


def test_the_page_writes_the_workbook_when_the_coder_moves_to_another_paper(tmp_path: Path):
    """A mark on the page is kept beside the workbook at once; the workbook takes it when the coder picks another
    paper (or downloads it), as a coder handing it on or opening it in Excel needs."""
    pytest.importorskip("streamlit")
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.journal import journal_path

    docs = [Document(p, TEXT, pages=[(0, len(TEXT))], source_path=f"/papers/{p}.pdf") for p in "AB"]
    start = TEXT.index("caret")
    sheet = write_result(RunResult(docs, load_question_set("mlpsych").select(["q2"]), [
        Answer(d.id, "q2", "caret", "extractive", ["m"], 0.5, start, start + 5, 1, TEXT, final=True, confidence=0.5)
        for d in docs]), tmp_path / "results.xlsx")
    texts = tmp_path / "texts.jsonl"
    write_jsonl(docs, texts)
    written = sheet.read_bytes()
    at = open_in_page(sheet, texts)
    rid = at.session_state["review_id"]
    at.radio(key=f"mark:{rid}:2").set_value("wrong").run()
    assert not at.exception and sheet.read_bytes() == written and journal_path(sheet).is_file()
    at.selectbox(key=f"review_paper:{rid}").set_value("B").run()
    assert not at.exception and not at.error and not journal_path(sheet).exists()
    assert [r["correct"] for r in read_sheet(sheet, "answers")] == ["no", None]
    assert "A (1 of 1 coded)" in at.selectbox(key=f"review_paper:{rid}").options


# ---------------------------------------------------------------------------------- re-reading with an adapted reader


def coded_review(sheet: Path) -> ReviewSheet:
    review = ReviewSheet(sheet, {"A": Document("A", TEXT, pages=[(0, len(TEXT))], source_path="/papers/A.pdf")})
    items = {i.answer: i for i in review.items("A")}
    review.mark(items["students"].row, False)
    review.mark(items["random forests"].row, True)
    review.correct_to(items["caret"].row, "the caret package")
    return review


OTHER = "We trained gradient boosting on 300 essays in Python. Logistic regression was the baseline."


def texts_file(tmp_path: Path, *, uncoded: bool = False) -> Path:
    """The review's paper A; ``uncoded``: and a paper B nobody coded yet."""
    texts = tmp_path / "texts.jsonl"
    documents = [Document("A", TEXT, pages=[(0, len(TEXT))], source_path="/papers/A.pdf")]
    if uncoded:
        documents.append(Document("B", OTHER, pages=[(0, len(OTHER))], source_path="/papers/B.pdf"))
    write_jsonl(documents, texts)
    return texts


@pytest.mark.slow
def test_adapt_and_reread_run_in_the_background(tmp_path: Path, sheet_path: Path, tiny_models, tiny_questions):
    from openpyxl import load_workbook

    from mlpsych.app.reread import DONE, FAILED, RereadJob, plan_reread

    review = coded_review(sheet_path)
    # a few coded answers: the reader answers every coded question (the default asks 16 answers of a question)
    plan = plan_reread(review, str(tiny_models["bert"]), str(texts_file(tmp_path, uncoded=True)),
                       questions=str(tiny_questions), normalize=False, min_answers=1)
    assert plan.uncoded == [] and "--no-normalize" in plan.run and "--min-answers" in plan.adapt
    assert plan.run[plan.run.index("--keep-coding") + 1] == str(sheet_path)
    assert plan.commands().splitlines()[0].startswith(f"mlpsych adapt --reader {tiny_models['bert']} --texts ")
    job = RereadJob(plan)
    assert job.poll().stage == "adapting"
    status = job.wait(timeout=600)
    assert status.stage == DONE, plan.log.read_text()
    assert str(plan.results) in status.message
    assert "continue the review in it" in status.message
    book = load_workbook(plan.results, read_only=True)
    rows = list(book["answers"].iter_rows(values_only=True))
    records = [dict(zip(rows[0], row)) for row in rows[1:]]
    # the coding so far, as coded: A's q1 and q2 (A's q3 and q4, not coded, were read again)
    coded = {(r["question_id"], r["answer"]): (r["correct"], r["corrected_answer"], r["models"]) for r in records
             if r["paper_id"] == "A" and r["question_id"] in ("q1", "q2")}
    assert coded == {("q1", "random forests"): ("yes", None, "m"), ("q1", "students"): ("no", None, "m"),
                     ("q2", "caret"): (None, "the caret package", "m")}
    models = {r["models"] for r in records if r["paper_id"] == "B" and r["question_id"] == "q1"}
    assert models and all(str(plan.reader_dir) in m for m in models)  # B was not coded: the adapted reader read it
    assert any("adapted" in str(cell) for row in book["run"].iter_rows(values_only=True) for cell in row)
    assert any(str(cell).startswith(f"coding kept from {sheet_path}") for row in book["run"].iter_rows(values_only=True)
               for cell in row)
    # A's q4, not coded, asks about A's q1 as coded: random forests, not "students", marked wrong
    kept = dict(book["run"].iter_rows(min_row=2, values_only=True))["kept_coding"]
    assert kept.endswith("; 1 follow-up entity asked about from the coding")
    assert {r["bridge_entity"] for r in records if r["paper_id"] == "A" and r["question_id"] == "q4"} <= {
        "random forests"}

    second = coded_review(results_sheet(tmp_path / "second.xlsx"))
    broken = plan_reread(second, str(tmp_path / "no-such-reader"), str(texts_file(tmp_path)),
                         questions=str(tiny_questions), normalize=False)
    failed = RereadJob(broken).wait(timeout=300)
    assert failed.stage == FAILED and failed.message.startswith("The re-read stopped: mlpsych: error:")
    assert "no-such-reader" in failed.message and not broken.results.exists()


def test_the_page_offers_the_reread_with_the_runs_commands(tmp_path: Path, sheet_path: Path):
    pytest.importorskip("streamlit")
    texts = texts_file(tmp_path)
    at = open_in_page(sheet_path, texts)
    commands = next(c.value for c in at.code if "mlpsych adapt" in c.value)
    assert f"--coded {sheet_path}" in commands and f"mlpsych run {texts}" in commands
    assert f"--keep-coding {sheet_path}" in commands  # the re-read's sheet keeps this coding
    assert at.button(key="reread_start").disabled  # no reader named yet
    at.text_input(key="reread_reader").input(str(tmp_path / "no-such-reader")).run()
    assert not at.button(key="reread_start").disabled
    at.button(key="reread_start").click().run()
    job = at.session_state["reread_job"]
    job.wait(timeout=300)
    at.run()
    assert any("The re-read stopped" in e.value and "no-such-reader" in e.value for e in at.error)


def test_the_review_shows_a_papers_text_as_written(tmp_path: Path):
    """The review rendered answers and evidence as markdown: "b*PMP + th*firmsize" lost its asterisks to italics."""
    pytest.importorskip("streamlit")
    text = "12. Results. The model was OPMi,j = a + b*PMPi,j + th*firmsize [1]."
    doc = Document("A", text, source_path="/papers/A.pdf")
    answer = "b*PMPi,j + th*firmsize"
    start = text.index(answer)
    sheet = write_result(RunResult([doc], load_question_set("mlpsych").select(["q1"]), [
        Answer("A", "q1", answer, "extractive", ["m"], 0.5, start, start + len(answer), 1, text, final=True,
               confidence=0.5)]), tmp_path / "results.xlsx")
    texts = tmp_path / "texts.jsonl"
    write_jsonl([doc], texts)
    at = open_in_page(sheet, texts)
    (line,) = [shown(m.value) for m in at.markdown if " · q1" in m.value]
    assert line.startswith(f"{answer} · q1 · confidence")
    assert text in [shown(c.value) for c in at.caption]


def test_a_sheet_that_cannot_be_written_is_said_and_the_coding_kept(tmp_path: Path):
    """A coder's mark on a sheet whose folder had gone (a network drive, a file open in Excel on Windows) was a raw
    traceback, and every later click too: the page read the file back for its download button."""
    pytest.importorskip("streamlit")
    import io
    import json
    import shutil

    from openpyxl import load_workbook

    from mlpsych.app.review import start_review

    share = tmp_path / "share"
    share.mkdir()
    sheet = results_sheet(share / "results.xlsx")
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "A", "text": TEXT}) + "\n")
    at = open_in_page(sheet, texts)
    rid = at.session_state["review_id"]
    rows = {i.answer: i.row for i in ReviewSheet(sheet, {"A": Document("A", TEXT)}).items("A")}
    kept = sheet.read_bytes()
    shutil.rmtree(share)
    at.radio(key=f"mark:{rid}:{rows['students']}").set_value("wrong").run()
    assert not at.exception
    (error,) = [shown(e.value) for e in at.error]
    assert error.startswith(f"Not saved in {sheet}: ") and "stays on this page" in error
    answers = load_workbook(io.BytesIO(at.session_state["review_sheet"].workbook_bytes()))["answers"]  # the download
    header = [c.value for c in answers[1]]
    assert [r[header.index("correct")] for r in answers.iter_rows(min_row=2, values_only=True)].count("no") == 1
    share.mkdir()
    sheet.write_bytes(kept)  # the folder back: the next change saves the coding held on the page as well
    at.radio(key=f"mark:{rid}:{rows['caret']}").set_value("correct").run()
    assert not at.exception and not at.error
    marks = {i.answer: i.correct for i in ReviewSheet(sheet, {"A": Document("A", TEXT)}).items("A")}
    assert marks == {"students": False, "caret": True, "random forests": None}
    with pytest.raises(AppInputError, match="cannot be written"):
        start_review(sheet / "review.xlsx", kept)  # a folder that cannot be made: said, not a traceback


def test_a_coded_csv_is_refused_in_one_line_that_says_how_to_continue(tmp_path: Path, sheet_path: Path, documents):
    """`mlpsych run --out results.csv` writes a coding form too (older versions' CSVs were coded by adding the
    columns); given to "Continue a review", the page said openpyxl's "check you can open it with Excel first". The
    way it names (the sheet named answers, saved as .xlsx) opens, with the CSV's coding."""
    import csv

    from openpyxl import Workbook

    from mlpsych.evaluation.evaluate import read_sheet

    rows = read_sheet(sheet_path, "answers")
    header = [name for name in rows[0] if name != "_row"]
    rows[0]["correct"] = "yes"
    coded = tmp_path / "coded.csv"
    with coded.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(AppInputError) as refused:
        ReviewSheet(coded, documents)
    assert "\n" not in str(refused.value) and "name its sheet 'answers' and save it as .xlsx" in str(refused.value)
    book = Workbook()  # what Excel saves, the sheet renamed as said
    book.active.title = "answers"
    with coded.open(encoding="utf-8", newline="") as f:
        for cells in csv.reader(f):
            book.active.append(cells)
    book.save(tmp_path / "coded.xlsx")
    sheet = ReviewSheet(tmp_path / "coded.xlsx", documents)
    assert [item.correct for item in sheet.items("A") if item.answer == rows[0]["answer"]] == [True]

def many_papers_sheet(path: Path, n_papers: int) -> tuple[Path, dict[str, Document]]:
    """A results workbook of ``n_papers`` papers with two answers each (a large study, in small)."""
    documents = {f"P{i:03d}": Document(f"P{i:03d}", TEXT, source_path=f"/papers/P{i:03d}.txt") for i in range(n_papers)}

    def answer(doc_id: str, text: str, confidence: float) -> Answer:
        start = TEXT.index(text)
        return Answer(doc_id, "q1", text, "extractive", ["m"], 0.5, start, start + len(text), None,
                      TEXT[:40], final=True, confidence=confidence)

    answers = [a for d in documents for a in (answer(d, "random forests", 0.8), answer(d, "students", 0.1))]
    result = RunResult(list(documents.values()), load_question_set("mlpsych").select(["q1"]), answers)
    return write_result(result, path), documents


def test_the_papers_menu_and_one_papers_answers_read_the_sheet_once_not_once_a_paper(tmp_path: Path):
    """A redraw of the review (every paper's count for the menu, one paper's answers) reads each row a few times,
    not once per paper: a 1,000-paper study's sheet took minutes a click when each count was a pass over it all."""
    path, documents = many_papers_sheet(tmp_path / "big.xlsx", 60)
    review = ReviewSheet(path, documents)
    review.mark(review.items("P007")[0].row, True)
    reads = 0
    cell = review._get

    def counted(*args, **kwargs):
        nonlocal reads
        reads += 1
        return cell(*args, **kwargs)

    review._get = counted
    counts = review.coded_counts()
    items = review.items("P030")
    rows = 2 * len(documents)
    assert reads <= 16 * rows, f"{reads} cells read for a sheet of {rows} rows"
    assert list(counts) == list(documents) and counts["P007"] == (1, 2) and counts["P030"] == (0, 2)
    assert [i.answer for i in items] == ["students", "random forests"] and {i.paper_id for i in items} == {"P030"}
    added = review.add("P030", "q1", "Support vector machines")
    assert review.coded_counts()["P030"] == (0, 2) and review.items("P030")[-1].row == added
