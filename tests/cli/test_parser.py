"""The CLI's parser as a whole: what every command's --help promises."""

from __future__ import annotations

import argparse

from mlpsych.cli import build_parser


def _options(name: str, parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _options(f"{name} {sub}", child)
        elif action.option_strings and action.dest != "help":
            yield name, action


def test_every_command_says_the_defaults_it_uses():
    """An option that takes a value and has a default says it in --help (calibrate's --questions and --unanswerable
    did not), so a researcher can tell what a run did without reading the code."""
    silent = [(name, action.option_strings) for name, action in _options("mlpsych", build_parser())
              if action.nargs != 0 and not action.required and action.default not in (None, argparse.SUPPRESS)
              and "default" not in (action.help or "").lower()]
    assert not silent
    assert sum(1 for _ in _options("mlpsych", build_parser())) > 50  # every command's options were looked at
