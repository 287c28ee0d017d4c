"""`mlpsych` command line: one module per sub-command, each with ``add_parser`` and a ``run(args)`` returning an exit code."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from mlpsych.errors import UserError

# Sub-command modules in the order data flows; each defines add_parser(subparsers) which sets func=run.
COMMANDS = ("ingest", "run", "eval", "agree", "calibrate", "adapt", "dev")



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mlpsych", description="Zero-shot extraction of coded answers from papers.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"mlpsych.cli.{name}_cmd")
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except UserError as error:
        print(f"mlpsych: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mlpsych: interrupted; finished work is kept in the cache, rerun to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
