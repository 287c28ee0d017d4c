"""`mlpsych dev ...`: developer helpers (tiny offline models)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("dev", help="developer helpers")
    sub = p.add_subparsers(dest="dev_command", required=True)
    tiny = sub.add_parser("tiny-models", help="build tiny random-weight models and a question file using them")
    tiny.add_argument("out_dir", type=Path)
    tiny.set_defaults(func=run_tiny_models)


def run_tiny_models(args: argparse.Namespace) -> int:
    from mlpsych.testing import build_tiny_models, write_tiny_question_file

    models = build_tiny_models(args.out_dir)
    questions = write_tiny_question_file(args.out_dir, models)
    for family, path in models.items():
        print(f"{family:12s} {path}")
    print(f"questions    {questions}")
    return 0
