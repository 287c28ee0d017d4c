"""Fixtures for fault tests: a folder of small papers, a fast question file, a local Ray instance."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

# The command line, as a user starts it (in a fresh interpreter, so it can be killed like one).
CLI = [sys.executable, "-c", "import sys; from mlpsych.cli import main; sys.exit(main(sys.argv[1:]))"]
RUN_OPTIONS = ["--no-progress", "--max-length", "192", "--stride", "48", "--max-sub-questions", "2", "--no-normalize"]


@pytest.fixture(scope="session")
def fast_questions(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ensemble question, a may-be-empty one and a bridge question on the fastest tiny readers."""
    path = tmp_path_factory.mktemp("fault-questions") / "questions.yaml"
    path.write_text(
        "questions:\n"
        "  - id: q1\n    text: What machine learning techniques were used?\n"
        f"    models: ['{tiny_models['electra']}', '{tiny_models['roberta']}']\n    top_k: 5\n"
        "  - id: q2\n    text: What software was used?\n"
        f"    models: ['{tiny_models['bert']}']\n    top_k: 3\n    allow_empty: true\n"
        "  - id: q4\n    text: What was __PLACEHOLDER__ used for?\n    kind: phrase\n"
        f"    models: ['{tiny_models['bert']}']\n    bridge_from: q1\n    top_k: 2\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="session")
def papers(examples_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The four example papers (a run of them can be caught in the middle)."""
    folder = tmp_path_factory.mktemp("papers")
    for path in sorted((examples_dir / "papers").glob("*.txt")):
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture(scope="session")
def reference(papers: Path, fast_questions: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """An uninterrupted run (in this process): its spreadsheet, its JSONL, its cache folder and keys."""
    from mlpsych.cli import main

    folder = tmp_path_factory.mktemp("reference")
    assert main(cli_args(papers, fast_questions, folder / "out.xlsx", folder / "cache")) == 0
    assert main(cli_args(papers, fast_questions, folder / "out.jsonl", folder / "cache")) == 0
    return {"xlsx": folder / "out.xlsx", "jsonl": folder / "out.jsonl", "cache": folder / "cache",
            "keys": set(cache_rows(folder / "cache"))}


def run_settings():
    """The settings RUN_OPTIONS give on the command line."""
    from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings

    return RunSettings(reader=ReaderSettings(max_length=192, stride=48), llm=LLMSettings(enabled=False),
                       max_sub_questions=2)


def cli_args(papers: Path, questions: Path, out: Path, cache: Path) -> list[str]:
    return ["run", str(papers), "--questions", str(questions), "--out", str(out), "--cache", str(cache), *RUN_OPTIONS]


def start_cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cache_rows(cache: Path) -> dict[str, float]:
    """key -> created time of every stored result (empty while the file does not exist yet)."""
    path = cache / "results.sqlite"
    if not path.exists():
        return {}
    with sqlite3.connect(path, timeout=30) as conn:
        try:
            return dict(conn.execute("SELECT key, created FROM results"))
        except sqlite3.OperationalError:  # the table is being created
            return {}


def integrity(cache: Path) -> str:
    with sqlite3.connect(cache / "results.sqlite", timeout=30) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
