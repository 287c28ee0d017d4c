"""The user documentation, checked against the code it describes: a researcher copies its commands, YAML and test
names literally, and docs drift as the code changes (reliability.md named tests that had been renamed, with the
behaviour they no longer checked)."""

from __future__ import annotations

import argparse
import re
import shlex
import textwrap
from pathlib import Path

import pytest
import yaml

from mlpsych.cli import build_parser
from mlpsych.questions import parse_question_set

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "examples" / "README.md"]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def doc_id(path: Path) -> str:
    return str(path.relative_to(REPO))


def commands() -> dict[tuple[str, ...], set[str]]:
    """Every sub-command (``("dev", "tiny-models")`` for nested ones) with the options it takes."""
    found: dict[tuple[str, ...], set[str]] = {}

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        for action in parser._actions:  # argparse keeps sub-parsers only here
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[prefix + (name,)] = {o for a in sub._actions for o in a.option_strings}
                    walk(sub, prefix + (name,))

    walk(build_parser(), ())
    return found


def code_in(text: str) -> list[str]:
    """The code a reader copies: fenced blocks' lines and inline code spans."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [line for block in blocks for line in block.splitlines()] + inline


def mlpsych_commands(text: str) -> list[str]:
    """Each ``mlpsych ...`` command of the code, cut at a shell operator or comment."""
    found = []
    for code in code_in(text):
        for part in re.split(r"&&|\|\||;|\s#\s", code):
            part = part.strip()
            if part.startswith("mlpsych "):
                found.append(part)
    return found


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_command_and_option_named_in_the_docs_exists(doc: Path) -> None:
    known = commands()
    wrong = []
    for command in mlpsych_commands(doc.read_text(encoding="utf-8")):
        words = [w for w in shlex.split(command.replace("...", ""), posix=True)][1:]
        name = tuple(words[:2]) if tuple(words[:2]) in known else tuple(words[:1])
        if name not in known:
            wrong.append(f"{command}: no command {' '.join(words[:1])!r}")
            continue
        wrong += [f"{command}: mlpsych {' '.join(name)} has no {flag}" for flag in FLAG.findall(command)
                  if flag not in known[name]]
    assert not wrong, "\n".join(wrong)


def test_the_command_check_can_fail() -> None:
    known = commands()
    text = "Run `mlpsych run PAPERS --quesitons mine.yaml` and\n```bash\nmlpsych evaluate --gold g.json\n```\n"
    found = mlpsych_commands(text)
    assert found == ["mlpsych evaluate --gold g.json", "mlpsych run PAPERS --quesitons mine.yaml"]
    assert "--quesitons" not in known[("run",)] and ("evaluate",) not in known


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_test_a_doc_names_exists(doc: Path) -> None:
    """``tests/x.py::test_y`` and the ``::test_z`` after it (same file) name tests that are there."""
    missing, current = [], None
    for match in re.finditer(r"(tests/[\w/]+\.py)(?:::(\w+))?|`::(\w+)`", doc.read_text(encoding="utf-8")):
        current = match.group(1) or current
        name = match.group(2) or match.group(3)
        path = REPO / current
        if not path.is_file():
            missing.append(current)
        elif name and not re.search(rf"^\s*(async )?def {name}\b", path.read_text(encoding="utf-8"), re.M):
            missing.append(f"{current}::{name}")
    assert not missing, f"{doc_id(doc)} names tests that do not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_yaml_snippet_is_a_valid_question_file(doc: Path) -> None:
    """A whole question file is loaded as it is; a fragment (a question's ``retrieval:`` block) inside a question."""
    snippets = re.findall(r"```yaml\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    for snippet in snippets:
        raw = yaml.safe_load(textwrap.dedent(snippet))
        if "questions" not in raw:
            raw = {"questions": [{"id": "q", "text": "What was used?", "models": ["some/reader"], **raw}]}
        assert parse_question_set(raw, doc_id(doc)).questions
