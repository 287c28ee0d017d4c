"""`mlpsych adapt --reader MODEL --texts TEXTS --out DIR (--coded SHEET... | --gold ANSWERS.json)`: a reader
fine-tuned on the study's own coding, for the papers not coded yet."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from mlpsych.cli import comma_list
from mlpsych.errors import UserError
from mlpsych.evaluation.evaluate import DEFAULT_UNANSWERABLE

log = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "adapt", help="fine-tune a SQuAD2 reader on coded answers (coded sheets or gold) into a reader folder",
        description="Fine-tune a SQuAD2 reader on the answers coders accepted, corrected or added (positives) and "
                    "marked wrong (negatives), and write a reader folder a question file's models: or `mlpsych run "
                    "--adapted DIR` uses. Rerunning the same command resumes from its checkpoints.")
    p.add_argument("--reader", required=True, help="the SQuAD2 reader to start from (Hub id or folder)")
    p.add_argument("--texts", type=Path, required=True,
                   help="the papers' texts: text.json, texts.jsonl from `mlpsych ingest`, or the papers' folder")
    p.add_argument("--out", type=Path, required=True, help="reader folder to write (replaced when it is one)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--coded", type=Path, nargs="+", metavar="SHEET",
                        help="results sheets (.xlsx, or the run's .csv) with the coder columns filled in")
    source.add_argument("--gold", type=Path, help="hand-coded answers in the `mlpsych eval --gold` format")
    p.add_argument("--questions", default="mlpsych", help="question file whose ids the coding uses (default: mlpsych)")
    p.add_argument("--replay", type=Path, default=None, help="SQuAD 2.0 JSON replayed against forgetting")
    p.add_argument("--replay-share", type=float, default=0.5, help="replayed records per coded record (default 0.5)")
    p.add_argument("--unanswerable", default=",".join(DEFAULT_UNANSWERABLE),
                   help=f"with --gold: questions where a paper without gold has no answer (default: "
                        f"{','.join(DEFAULT_UNANSWERABLE)})")
    p.add_argument("--epochs", type=float, default=None, help="passes over the records (default 4)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default 5e-5)")
    p.add_argument("--batch-size", type=int, default=None, help="features per step (default 16)")
    p.add_argument("--micro-batch-size", type=int, default=None,
                   help="features per forward and backward pass, where a step's batch does not fit in memory "
                        "(default: the whole batch; the same step, in parts)")
    p.add_argument("--negatives", type=float, default=1.0,
                   help="passages without an answer drawn per answer, as unanswerable records (default 1)")
    p.add_argument("--min-answers", type=int, default=None,
                   help="coded answers a question needs for runs to use the adapted reader for it; questions with "
                        "fewer keep their base reader (default 16)")
    p.add_argument("--calibration-folds", type=int, default=None,
                   help="the calibrator of the reader's answers is fitted on the coded papers, each read by a reader "
                        "adapted on the other folds' papers; this many folds (each costs about one more adaptation "
                        "on fewer papers), 0 for none: runs then use the default calibrator (default 3)")
    p.add_argument("--calibration-read", choices=["all", "retrieve"], default="all",
                   help="windows those readers read, as the runs that will use this reader read them (`mlpsych run "
                        "--read`; default: all)")
    p.add_argument("--heldout-papers", type=int, default=0,
                   help="hold out the last N coded papers and report passage-level figures on them (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draws, batch order and dropout (default 0)")
    p.add_argument("--checkpoints", type=Path, default=None,
                   help="checkpoint folder (default: <cache>/readers/adapted/<OUT name>/checkpoints)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this step (rerun to continue)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--device", default=None, help="where to train: auto (default: a CUDA GPU, then MPS, else the "
                                                  "CPU), cpu, cuda, cuda:N or mps")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from mlpsych.cli.ingest_cmd import ingest_from_args, unread_papers_said
    from mlpsych.coding.adapt import AdaptError, AdaptOptions, adapt, adapt_settings, summary_lines
    from mlpsych.coding.coded import coding_from_gold, coding_from_sheets
    from mlpsych.dev.train_reader import inside_repository
    from mlpsych.errors import EvalInputError, PapersNotInTexts, QuestionFileError
    from mlpsych.evaluation.sheets import check_sheet_file
    from mlpsych.models import ModelLoadError
    from mlpsych.questions import load_question_sets
    from mlpsych.settings import RetrievalSettings, RunSettings

    if inside_repository(args.out):
        raise UserError(f"--out {args.out} is inside the repository: write readers into a cache folder")
    if args.replay is not None and not args.replay.is_file():
        raise UserError(f"--replay {args.replay}: no such file")
    for sheet in args.coded or []:
        check_sheet_file(sheet, "--coded")
    try:
        questions = load_question_sets(comma_list(args.questions))
    except QuestionFileError as error:
        raise UserError(str(error)) from None
    read = ingest_from_args(args, args.texts)
    documents = {d.id: d for d in read if d.ok}
    try:
        if args.gold:
            unanswerable = comma_list(args.unanswerable)
            coding = coding_from_gold(args.gold, documents, unanswerable)
            source = {"gold": str(args.gold)}
        else:
            coding = coding_from_sheets(args.coded, documents)
            source = {"coded": [str(s) for s in args.coded]}
        source["texts"] = str(args.texts)
        given = {k: v for k, v in (("epochs", args.epochs), ("lr", args.lr), ("batch_size", args.batch_size),
                                   ("micro_batch_size", args.micro_batch_size),
                                   ("threads", args.threads), ("seed", args.seed), ("device", args.device))
                 if v is not None}
        settings = adapt_settings(args.reader, **given)
        options = AdaptOptions(negatives=args.negatives, replay=args.replay, replay_share=args.replay_share,
                               heldout_papers=args.heldout_papers, seed=args.seed,
                               **{k: v for k, v in (("min_answers", args.min_answers),
                                                    ("calibration_folds", args.calibration_folds)) if v is not None})
        result = adapt(coding, documents, questions, args.out, settings, options, checkpoints=args.checkpoints,
                       max_steps=args.max_steps, progress=not args.no_progress, source=source,
                       run_settings=RunSettings(retrieval=RetrievalSettings(read=args.calibration_read)))
    except PapersNotInTexts as error:
        raise UserError(unread_papers_said(error, read)) from None
    except (EvalInputError, AdaptError) as error:
        raise UserError(str(error)) from None
    except ValidationError as error:
        raise UserError(f"bad training settings: {error.errors()[0]['msg']}") from None
    except ModelLoadError as error:
        raise UserError(str(error).splitlines()[0]) from None
    for line in summary_lines(result):
        print(line)
    if result.out_dir is None:
        print(f"stopped at step {result.step} of {result.steps_total}; checkpoint in {result.checkpoint_dir} "
              "(rerun the same command to continue)")
    else:
        print(f"adapted reader written to {result.out_dir}")
    return 0
