"""`mlpsych` command line: one module per sub-command, each with ``add_parser`` and a ``run(args)`` returning an exit code.

A user's mistake is one line (``UserError``, a bad choice, a missing argument); anything else is a bug, shown as
such with how to report it. Transformers' own progress bars and INFO lines stay quiet unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import tempfile
import traceback
from pathlib import Path

from mlpsych.errors import UserError, bug_report, one_line
from mlpsych.provenance import version

# Sub-command modules in the order data flows; each defines add_parser(subparsers) which sets func=run.
COMMANDS = ("ingest", "run", "eval", "agree", "calibrate", "adapt", "app", "cache", "dev")


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors (a bad choice, a missing argument) are one line, not the whole usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def comma_list(value: str | None) -> list[str]:
    """The names of a comma-separated option (``--only q1, q2``), each stripped: a researcher types a space after
    the comma, and " q2" is no question id or file name."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def check_output(path: Path, flag: str = "--out") -> None:
    """Before any paper is read: the output's folder exists (or is made) and takes a file, so a run never ends
    in a traceback at the write."""
    folder = path.expanduser().absolute().parent
    if path.expanduser().is_dir():  # found only at the write, after every paper was read
        example = path / f"results{path.suffix or '.xlsx'}"
        raise UserError(f"{flag} {path} is a folder: give a file name in it, such as {example}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".mlpsych-write-check-"):
            pass
    except OSError as error:
        reason = error.strerror or one_line(error)
        raise UserError(f"{flag} {path}: cannot write a file in {folder} ({reason})") from None


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mlpsych", description="Zero-shot extraction of coded answers from papers.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug logging, with transformers' own progress bars and messages")
    parser.add_argument("--version", action="version", version=f"mlpsych {version()}",
                        help="the version, to report a problem with (each run's sheet records it too)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"mlpsych.cli.{name}_cmd")
        module.add_parser(sub)
    return parser


def quiet_libraries() -> None:
    """Transformers' and the Hub's progress bars and INFO lines off (they interleave with ours); what the user
    set in the environment wins."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "huggingface_hub" in sys.modules and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1":
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules and os.environ["TRANSFORMERS_VERBOSITY"] == "error":
        from transformers.utils import logging as transformers_logging

        transformers_logging.set_verbosity_error()
        transformers_logging.disable_progress_bar()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        quiet_libraries()
    try:
        return int(args.func(args) or 0)
    except UserError as error:
        print(f"mlpsych: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mlpsych: interrupted; finished work is kept in the cache, rerun to resume", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - not a user's mistake: say so, and how to report it
        if args.verbose:
            traceback.print_exc()
        print(f"mlpsych: {one_line(error)}\nmlpsych: {bug_report('the command you ran', 'rerun with --verbose')}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
