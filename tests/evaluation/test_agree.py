"""Precision and Cohen's kappa from a coded "answers" sheet, checked against hand computation."""

from __future__ import annotations

import argparse
import math

import pytest

openpyxl = pytest.importorskip("openpyxl")

from mlpsych.cli import agree_cmd  # noqa: E402
from mlpsych.errors import UserError  # noqa: E402
from mlpsych.evaluation import agree  # noqa: E402
from mlpsych.marks import is_final, parse_code  # noqa: E402

# question, models, stage, correct, correct_2 (row 9 holds an unreadable mark, row 8 a blank)
CODED = [
    ("q1", "deberta", "extractive", "yes", "yes"),
    ("q1", "deberta", "extractive", "no", "Yes"),
    ("q1", "deberta", "extractive", "✓", "✓"),
    ("q1", "roberta", "extractive", 1, 0),
    ("q1", "deberta+roberta", "normalized", True, "y"),
    ("q1", "deberta+roberta", "normalized", "n", "N"),
    ("q2", "deberta", "extractive", "✗", "false"),
    ("q2", "deberta", "extractive", "TRUE", None),
    ("q2", "roberta", "extractive", "maybe", "no"),
    ("q2", "deberta+roberta", "normalized", "Yes", "1"),
]
# Coder "correct":   T F T T T F F T - T      Coder "correct_2": T T T F T F F - F T
# Precision (correct):   q1 deberta extractive 2/3, roberta 1/1, combined 1/2, q1 all 4/6;
#                        q2 deberta 1/2, roberta nothing coded, combined 1/1, q2 all 2/3; overall 6/9
# Precision (correct_2): q1 deberta 3/3, roberta 0/1, combined 1/2, q1 all 4/6; q2 deberta 0/1, roberta 0/1,
#                        combined 1/1, q2 all 1/3; overall 5/9
# Kappa, all rows coded by both (1-7, 10): pairs TT FT TT TF TT FF FF TT -> observed 6/8;
#   p(T) = 5/8 for both coders -> expected (5/8)^2 + (3/8)^2 = 34/64; kappa = (48/64-34/64)/(30/64) = 7/15
# Kappa q1 (rows 1-6): observed 4/6, p(T) = 4/6 for both -> expected 5/9; kappa = (1/9)/(4/9) = 1/4


def _write(tmp_path, extra_coder: bool = False):
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "answers"
    header = ["paper_id", "question_id", "answer", "stage", "models", "correct", "corrected_answer", "notes",
              "correct_2"]
    if extra_coder:
        header.append("correct_maria")
    sheet.append(header)
    for question, models, stage, first, second in CODED:
        cells = ["p1", question, "an answer", stage, models, first, None, None, second]
        if extra_coder:
            cells.append(first)
        sheet.append(cells)
    book.create_sheet("papers").append(["paper_id"])
    path = tmp_path / "coded.xlsx"
    book.save(path)
    return path


def test_parse_code_is_lenient_but_not_careless():
    for value in ("yes", "Y", "1", 1, 1.0, True, "true", "✓", "✔"):
        assert parse_code(value) is True
    for value in ("no", "n", "0", 0, False, "FALSE", "✗", "✘"):
        assert parse_code(value) is False
    assert parse_code(None) is None and parse_code("  ") is None
    for value in ("maybe", 2, "x"):
        with pytest.raises(ValueError):
            parse_code(value)


def test_cohen_kappa_hand_values():
    a = [True, False, True, True, True, False, False, True]
    b = [True, True, True, False, True, False, False, True]
    assert agree.cohen_kappa(a, b) == pytest.approx(7 / 15)
    assert agree.cohen_kappa([True, False], [True, False]) == pytest.approx(1.0)
    assert agree.cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)
    assert math.isnan(agree.cohen_kappa([True, True], [True, True]))  # chance agreement is total


def test_precision_and_kappa_from_sheet(tmp_path):
    codings, coders = agree.read_codings(_write(tmp_path))
    assert coders == ["correct", "correct_2"]
    precision = {(r.question, r.model, r.stage): r for r in agree.precision_table(codings, coders)}
    expected_first = {
        ("q1", "deberta", "extractive"): 2 / 3, ("q1", "roberta", "extractive"): 1.0,
        ("q1", "combined", "normalized"): 0.5, ("q1", "all", ""): 4 / 6,
        ("q2", "deberta", "extractive"): 0.5, ("q2", "combined", "normalized"): 1.0, ("q2", "all", ""): 2 / 3,
        ("all", "all", ""): 6 / 9,
    }
    for key, value in expected_first.items():
        assert precision[key].precision["correct"] == pytest.approx(value), key
    # a normalized answer also counts for each model whose output held it (rows 5-6: T, F)
    assert precision[("q1", "deberta", "normalized")].precision["correct"] == pytest.approx(0.5)
    assert precision[("q1", "roberta", "normalized")].n == 2
    assert math.isnan(precision[("q2", "roberta", "extractive")].precision["correct"])
    assert precision[("q2", "roberta", "extractive")].coded == {"correct": 0, "correct_2": 1}
    assert precision[("q1", "deberta", "extractive")].precision["correct_2"] == pytest.approx(1.0)
    assert precision[("q2", "all", "")].precision["correct_2"] == pytest.approx(1 / 3)
    assert precision[("all", "all", "")].precision["correct_2"] == pytest.approx(5 / 9)
    assert precision[("all", "all", "")].n == 10
    kappas = {k.question: k for k in agree.kappa_table(codings, coders)}
    assert kappas["all"].n == 8
    assert kappas["all"].agreement == pytest.approx(0.75)
    assert kappas["all"].kappa == pytest.approx(7 / 15)
    assert kappas["q1"].kappa == pytest.approx(0.25)


def test_every_pair_of_coders_gets_a_kappa(tmp_path):
    codings, coders = agree.read_codings(_write(tmp_path, extra_coder=True))
    assert coders == ["correct", "correct_2", "correct_maria"]
    overall = [k for k in agree.kappa_table(codings, coders) if k.question == "all"]
    assert [(k.coder_a, k.coder_b) for k in overall] == [
        ("correct", "correct_2"), ("correct", "correct_maria"), ("correct_2", "correct_maria")]
    assert overall[1].kappa == pytest.approx(1.0)  # maria copied the first coder


def _run_cli(argv):
    parser = argparse.ArgumentParser()
    agree_cmd.add_parser(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_prints_and_writes(tmp_path, capsys):
    out = tmp_path / "agree.md"
    assert _run_cli(["agree", str(_write(tmp_path)), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Cohen's kappa" in printed and "0.467" in printed
    assert printed == out.read_text() + "\n"  # print() adds one newline to the report it writes
    csv_out = tmp_path / "agree.csv"
    assert _run_cli(["agree", str(_write(tmp_path)), "--out", str(csv_out)]) == 0
    assert csv_out.read_text().splitlines()[0].startswith("question,model,stage,answers,coded_correct")


def test_a_coded_sheet_saved_as_csv_gives_the_same_report(tmp_path, capsys):
    """`mlpsych agree coded.csv` was refused ("expected an .xlsx workbook")."""
    import csv

    rows = openpyxl.load_workbook(_write(tmp_path))["answers"].iter_rows(values_only=True)
    saved = tmp_path / "coded.csv"
    with saved.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(["" if v is None else v for v in row] for row in rows)
    reports = []
    for path in (tmp_path / "coded.xlsx", saved):
        assert _run_cli(["agree", str(path)]) == 0
        reports.append(capsys.readouterr().out)
    assert reports[1] == reports[0] and "0.467" in reports[1]
    with pytest.raises(UserError, match="expected the results sheet"):
        _run_cli(["agree", str(tmp_path / "coded.ods")])


def test_cli_user_errors(tmp_path):
    book = openpyxl.Workbook()
    book.active.title = "answers"
    book.active.append(["paper_id", "question_id", "answer"])
    book.active.append(["p1", "q1", "x"])
    path = tmp_path / "uncoded.xlsx"
    book.save(path)
    with pytest.raises(UserError, match="no 'correct' column"):
        _run_cli(["agree", str(path)])
    with pytest.raises(UserError, match="no such file"):
        _run_cli(["agree", str(tmp_path / "missing.xlsx")])
    other = openpyxl.Workbook()
    other.active.title = "results"
    other.save(tmp_path / "wrong.xlsx")
    with pytest.raises(UserError, match="no sheet named 'answers'"):
        _run_cli(["agree", str(tmp_path / "wrong.xlsx")])


def test_answers_a_coder_added_are_not_counted_as_the_tools(tmp_path):
    """The review view adds a coder's own answer as a row of stage "coder" marked correct: `mlpsych agree` counted
    it as a correct answer of the tool (q1 all 0.571 where the tool's answers were 1 of 4 right)."""
    path = _write(tmp_path)
    book = openpyxl.load_workbook(path)
    for _ in range(3):
        book["answers"].append(["p1", "q1", "an added answer", "coder", None, "yes", None, None, "yes"])
    book.save(path)
    codings, coders = agree.read_codings(path)
    precision = {(r.question, r.model, r.stage): r for r in agree.precision_table(codings, coders)}
    assert precision[("q1", "all", "")].precision["correct"] == pytest.approx(4 / 6)
    assert precision[("all", "all", "")].n == 10
    assert not any(stage == "coder" for _, _, stage in precision)
    assert next(k for k in agree.kappa_table(codings, coders) if k.question == "all").n == 8


def test_a_second_coder_column_named_by_hand_is_read(tmp_path):
    """A second coder who added the column "Correct 2" (or "correct2", "correct (Maria)") was left out without a
    word: one coder, no kappa."""
    for name in ("Correct 2", "correct2", "correct (Maria)"):
        path = _write(tmp_path)
        book = openpyxl.load_workbook(path)
        book["answers"].cell(row=1, column=9, value=name)
        book.save(path)
        codings, coders = agree.read_codings(path)
        assert coders == ["correct", name.lower()]
        assert next(k for k in agree.kappa_table(codings, coders) if k.question == "all").kappa == pytest.approx(7 / 15)
    assert agree.coder_columns([{"correct": 1, "corrected_answer": "x", "correctness": 1}]) == ["correct"]


def test_an_answer_corrected_but_left_unmarked_counts_as_wrong(tmp_path):
    """The review view writes a correction without a mark: `mlpsych agree` left such answers out of precision, so
    the answers coders had to fix did not lower it (and the calibrator counts them as wrong)."""
    path = _write(tmp_path)
    book = openpyxl.load_workbook(path)
    sheet = book["answers"]
    sheet.append(["p1", "q2", "an answer", "extractive", "deberta", None, "the right answer", None, None])
    sheet.append(["p1", "q2", "an answer", "extractive", "deberta", "yes", "the right answer", None, None])
    sheet.cell(row=1, column=10, value="corrected_answer_2")
    sheet.cell(row=2, column=10, value="the right answer")  # row 1: the second coder marked it yes and corrected
    book.save(path)
    codings, coders = agree.read_codings(path)
    precision = {(r.question, r.model, r.stage): r for r in agree.precision_table(codings, coders)}
    deberta = precision[("q2", "deberta", "extractive")]
    assert deberta.coded["correct"] == 4 and deberta.precision["correct"] == pytest.approx(2 / 4)
    assert precision[("q1", "deberta", "extractive")].precision["correct_2"] == pytest.approx(1.0)  # a mark wins


def test_marks_typed_from_an_emoji_picker_are_read():
    """"✔️" (the check mark and U+FE0F) and "✅" were unreadable marks, skipped, where "❌" was read."""
    for value in ("✔\ufe0f", "✅", "☑\ufe0f", " ✓\ufe0e "):
        assert parse_code(value) is True, value
    for value in ("❌", "❎", "✖\ufe0f", "☒"):
        assert parse_code(value) is False, value


def test_a_second_coder_column_named_like_the_first_is_refused(tmp_path):
    """A second coder who named the added column "correct" too silently replaced the first coder's marks."""
    path = _write(tmp_path)
    book = openpyxl.load_workbook(path)
    book["answers"].cell(row=1, column=9, value="Correct")
    book.save(path)
    with pytest.raises(UserError, match=r"two columns named alike \('correct' in columns F and I\): rename one"):
        _run_cli(["agree", str(path)])


def test_a_dash_in_the_report_says_why(tmp_path, capsys):
    """Two coders who marked every answer "yes" got kappa "–" (undefined: chance agreement is total) with no word,
    as did a precision nobody coded and a pair with no answer in common: the report now says what each means."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "answers"
    sheet.append(["paper_id", "question_id", "answer", "stage", "models", "correct", "correct_2", "correct_3"])
    for paper in ("p1", "p2", "p3"):
        sheet.append([paper, "q1", "an answer", "extractive", "deberta", "yes", "yes", None])
    sheet.append(["p4", "q2", "an answer", "extractive", "deberta", None, None, "no"])
    path = tmp_path / "coded.xlsx"
    book.save(path)
    assert _run_cli(["agree", str(path)]) == 0
    out = capsys.readouterr().out
    first_pair = next(line for line in out.splitlines() if line.startswith("| correct vs correct_2 | q1 "))
    assert first_pair.split("|")[3:6] == [" 3 ", " 1.000 ", " – "]
    assert "kappa is undefined, both coders gave all of them one and the same mark" in out
    assert "that coder marked none of these answers" in out
    assert "the two coders marked none of the same answers" in out


def test_a_report_without_a_dash_has_no_note(tmp_path, capsys):
    """The notes explain a "–"; a report with none has none of them."""
    codings, coders = agree.read_codings(_write(tmp_path))
    codings = [c for c in codings if c.question == "q1"]
    text = agree.report_markdown(agree.precision_table(codings, coders), agree.kappa_table(codings, coders), coders)
    assert "–" not in text


def test_ungrounded_items_have_their_own_rows_but_are_not_the_tools_answers(tmp_path):
    """The answers sheet keeps an LLM's items not found in the paper (stage "ungrounded", never a paper's answer,
    never scored by `mlpsych eval`) for review; coders marking them wrong lowered the tool's `all` precision (q1 all
    4/8 where the tool's answers were 4/6 right)."""
    path = _write(tmp_path)
    book = openpyxl.load_workbook(path)
    for _ in range(2):
        book["answers"].append(["p1", "q1", "SVM", "ungrounded", "deberta", "no", None, None, "no"])
    book.save(path)
    codings, coders = agree.read_codings(path)
    precision = {(r.question, r.model, r.stage): r for r in agree.precision_table(codings, coders)}
    assert precision[("q1", "all", "")].precision["correct"] == pytest.approx(4 / 6)
    assert precision[("all", "all", "")].n == 10
    assert precision[("all", "all", "")].precision["correct_2"] == pytest.approx(5 / 9)
    ungrounded = precision[("q1", "deberta", "ungrounded")]
    assert ungrounded.n == 2 and ungrounded.precision["correct"] == 0.0


def test_two_coders_sheets_given_together_are_told_how_to_compare(tmp_path):
    """Coders who each coded a copy of the sheet, given as `mlpsych agree a.xlsx b.xlsx`, got argparse's
    "unrecognized arguments" and no word on how to get their kappa."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    paths = [str(_write(first)), str(_write(second))]
    with pytest.raises(UserError, match=r"2 sheets given: .*as 'correct_<name>'.*give that sheet alone"):
        _run_cli(["agree", *paths])
    assert _run_cli(["agree", paths[0]]) == 0


def test_ungrounded_items_a_run_kept_as_answers_count_for_its_precision():
    """`--preset reference` keeps ungrounded items as final answers (the released code did): there they are the
    tool's answers and count in the `all` rows; the sheet's `final` column says which."""
    right = agree.Coding("q1", ["m"], "normalized", {"correct": True})
    kept = agree.Coding("q1", ["m"], "ungrounded", {"correct": False}, final=True)
    apart = agree.Coding("q1", ["m"], "ungrounded", {"correct": False}, final=False)
    assert [is_final({"final": v, "stage": "ungrounded"}) for v in (True, "TRUE", "False", None)] == \
        [True, True, False, False]
    for codings, expected in (([right, kept], 0.5), ([right, apart], 1.0)):
        rows = {(r.question, r.model): r for r in agree.precision_table(codings, ["correct"])}
        assert rows[("q1", "all")].precision["correct"] == pytest.approx(expected)


def test_ticks_crosses_and_yes_no_in_other_languages_are_read():
    """"√", "×", "ja", "nein", "oui", "non", "sí" were unreadable marks, skipped with a warning; "x" stays unread
    (some coders tick with it, others cross out with it)."""
    for value in ("√", "ja", "Ja", "oui", "sí", "si", "Sì"):
        assert parse_code(value) is True, value
    for value in ("×", "nein", "Non", "non."):
        assert parse_code(value) is False, value
    for value in ("x", "X"):
        with pytest.raises(ValueError):
            parse_code(value)


def test_an_out_that_cannot_be_written_is_said_before_the_sheet_is_read(tmp_path, capsys):
    """`--out report.md` that is a folder printed the whole report, then "this is a bug in mlpsych"."""
    (tmp_path / "report.md").mkdir()
    with pytest.raises(UserError, match=r"--out .*report.md is a folder: give a file name in it"):
        _run_cli(["agree", str(_write(tmp_path)), "--out", str(tmp_path / "report.md")])
    assert capsys.readouterr().out == ""
