"""`mlpsych calibrate`: fit the confidence calibrator on a study's coded answers (or gold) for its later runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from mlpsych.cli import check_output, comma_list
from mlpsych.errors import UserError
from mlpsych.evaluation.evaluate import DEFAULT_UNANSWERABLE


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="fit the confidence column's calibrator on coded answers (or gold)",
        description="Fit the logistic calibrator behind the answers' confidence column on answers coders marked "
                    "(--coded) or on a run scored against gold (--gold with --pred); `mlpsych run --calibrator "
                    "FILE` then uses it instead of the default fitted on the development papers.")
    p.add_argument("--texts", type=Path, required=True, help="the papers' texts (text.json, texts.jsonl or folder)")
    p.add_argument("--out", type=Path, required=True, help="calibrator file to write (.json)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--coded", type=Path, nargs="+", metavar="SHEET",
                        help="coded results sheets (.xlsx, or the run's .csv)")
    source.add_argument("--gold", type=Path, help="gold answers in the `mlpsych eval --gold` format (needs --pred)")
    p.add_argument("--pred", type=Path, default=None, help="with --gold: the run's .xlsx, .csv or .jsonl")
    p.add_argument("--questions", default="mlpsych",
                   help="question file of the run (the questions' kinds; default: mlpsych)")
    p.add_argument("--unanswerable", default=",".join(DEFAULT_UNANSWERABLE),
                   help=f"with --gold: questions whose absent papers have no answer (default: "
                        f"{','.join(DEFAULT_UNANSWERABLE)})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mlpsych.cli.ingest_cmd import ingest_from_args, unread_papers_said
    from mlpsych.coding import confidence as cf
    from mlpsych.coding.coded import check_papers, row_papers
    from mlpsych.errors import EvalInputError, PapersNotInTexts, QuestionFileError
    from mlpsych.evaluation import evaluate as ev
    from mlpsych.evaluation.sheets import check_sheet_file
    from mlpsych.questions import load_question_sets

    if args.out.suffix.lower() != ".json":
        raise UserError(f"--out {args.out}: a calibrator is a .json file")
    check_output(args.out)  # before the papers are read and answers fitted
    if args.gold and not args.pred:
        raise UserError("--gold needs --pred, the run whose answers the gold judges")
    for sheet in args.coded or []:  # before the papers are read, as adapt checks them
        check_sheet_file(sheet, "--coded")
    try:
        questions = load_question_sets(comma_list(args.questions))
    except QuestionFileError as error:
        raise UserError(str(error)) from None
    kinds = {q.id: q.kind for q in questions.questions}
    read = ingest_from_args(args, args.texts)
    texts = {d.id: d.text for d in read if d.ok}
    try:
        if args.gold:
            gold = ev.load_gold(args.gold)
            unanswerable = comma_list(args.unanswerable)
            rows = ev.load_predictions(args.pred)
            check_papers(row_papers(rows), texts, str(args.pred))
            data = cf.labelled(rows, texts, kinds, lambda row, item: cf.gold_label(item, gold, unanswerable))
            fitted_on = {"gold": str(args.gold), "run": str(args.pred)}
        else:
            rows = cf.merged_sheets([_sheet_rows(sheet, texts) for sheet in args.coded])
            data = cf.labelled(rows, texts, kinds, lambda row, item: cf.sheet_label(row))
            fitted_on = {"coded": [str(s) for s in args.coded]}
    except PapersNotInTexts as error:
        raise UserError(unread_papers_said(error, read)) from None
    except EvalInputError as error:
        raise UserError(str(error)) from None
    try:
        calibrator = cf.fit(data.x, data.y, fitted_on, groups=data.papers)
    except cf.CalibratorError as error:
        correct = int(data.y.sum())
        raise UserError(f"{error}: code more answers first ({correct} correct, {len(data.y) - correct} "
                        "wrong so far)") from None
    calibrator.save(args.out)
    print(f"in sample: {cf.report(calibrator.predict(data.x), data.y).line()}")
    print(f"calibrator written to {args.out} (use it with `mlpsych run --calibrator {args.out}`)")
    return 0


def _sheet_rows(sheet: Path, texts: dict[str, str]) -> list[dict]:
    """A coded sheet's answer rows; a sheet of another corpus (or the wrong --texts) is refused, as `mlpsych adapt`
    refuses it: fitted anyway, every answer would look absent from its paper. Unreadable marks are named."""
    from mlpsych.coding.coded import check_papers, row_papers
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.evaluation.sheets import check_coded
    from mlpsych.marks import warn_unreadable

    rows = read_sheet(sheet, "answers")
    check_coded(rows, sheet)
    check_papers(row_papers(rows), texts, str(sheet))
    warn_unreadable(rows, ["correct"], sheet)
    return rows
