"""Fixtures for engine tests: one local Ray instance per test session, and a small fast question file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlpsych.ingest import load_documents


def write_questions(folder: Path, models: dict[str, Path], *, normalize: bool = False) -> Path:
    """A q1 ensemble (two readers), a may-be-empty q2 and a bridge q4: every path the pipeline has, on the
    fastest tiny models (ELECTRA, RoBERTa, BERT), optionally with Llama normalization of q1."""
    norm = (f"    normalize:\n      model: {models['llama']}\n"
            "      prompt: 'Return the techniques as a Python list of strings. Snippets: {answers}'\n") if normalize else ""
    path = folder / "questions.yaml"
    path.write_text(
        "questions:\n"
        "  - id: q1\n    text: What machine learning techniques were used?\n"
        f"    models: ['{models['electra']}', '{models['roberta']}']\n    top_k: 5\n{norm}"
        "  - id: q2\n    text: What software was used?\n"
        f"    models: ['{models['bert']}']\n    top_k: 3\n    allow_empty: true\n"
        "  - id: q4\n    text: What was __PLACEHOLDER__ used for?\n    kind: phrase\n"
        f"    models: ['{models['bert']}']\n    bridge_from: q1\n    top_k: 2\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="session")
def example_documents(examples_dir: Path):
    return load_documents(examples_dir / "papers", pdf_backend="pdfium", progress=False)
