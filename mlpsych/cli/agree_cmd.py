"""`mlpsych agree CODED.xlsx` (or its .csv): precision of the answers a researcher coded, and agreement between
coders."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from mlpsych.cli import check_output
from mlpsych.errors import UserError
from mlpsych.files import write_whole

log = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "agree", help="precision and coder agreement from a coded spreadsheet",
        description="Read the 'answers' sheet after coders marked answers correct (column 'correct', a second coder "
                    "in 'correct_2' or 'correct_<name>'): precision by question and model, Cohen's kappa per pair.")
    # nargs="+": coders who each coded a copy give both, and are told how to compare them (not "unrecognized")
    p.add_argument("coded", type=Path, nargs="+",
                   help="the .xlsx (or .csv) written by `mlpsych run`, with the coder columns filled in")
    p.add_argument("--out", type=Path, default=None, help="write the report: a .md or .csv (precision table) file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mlpsych.evaluation import agree
    from mlpsych.evaluation.evaluate import EvalInputError
    from mlpsych.evaluation.sheets import check_sheet_file

    if len(args.coded) > 1:
        raise UserError(f"{len(args.coded)} sheets given: agree compares coders within one sheet. Copy each other "
                        "coder's 'correct' column (and 'corrected_answer') into the first sheet beside its own, as "
                        "'correct_<name>' (and 'corrected_answer_<name>'), with the rows in the same order; then give "
                        "that sheet alone")
    args.coded = args.coded[0]
    if args.out:  # before the sheet is read, not after the report is printed
        if args.out.suffix.lower() not in (".md", ".csv"):
            raise UserError(f"--out {args.out}: use a .md or .csv file name")
        check_output(args.out)
    try:
        check_sheet_file(args.coded, "coded sheet")
        codings, coders = agree.read_codings(args.coded)
    except EvalInputError as error:
        raise UserError(str(error)) from None
    if not any(mark is not None for c in codings for mark in c.marks.values()):
        raise UserError(f"{args.coded}: no answer is coded yet (fill the 'correct' column with yes/no)")
    precision = agree.precision_table(codings, coders)
    kappas = agree.kappa_table(codings, coders)
    markdown = agree.report_markdown(precision, kappas, coders)
    print(markdown)
    if args.out:
        write_whole(args.out, markdown if args.out.suffix.lower() == ".md" else agree.report_csv(precision, coders))
        log.info("wrote %s", args.out)
    return 0
