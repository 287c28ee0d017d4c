"""A small synthetic corpus, its coded results sheet, and a tiny reader to adapt."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlpsych.dev import tiny
from mlpsych.documents import Document

PAPER_A = (
    "Participants were 120 students. We used random forests to predict dropout. "
    "Hyperparameters were tuned by grid search. Models were fitted in R with the caret package. "
    "Support vector machines served as a baseline. The aim was to predict which students leave early. "
    "We compared random forests with logistic regression. Random forests were used for feature ranking."
)
PAPER_B = (
    "Essays were scored by raters. Latent Dirichlet allocation was applied to the essays. "
    "Topics were analysed in Python with gensim. We asked whether topics differ between groups."
)
PAPER_C = "A survey of teachers was run. No models were trained. Descriptive statistics are reported."


@pytest.fixture
def documents() -> dict[str, Document]:
    return {d.id: d for d in (Document("A", PAPER_A), Document("B", PAPER_B), Document("C", PAPER_C))}


HEADER = ["paper_id", "source_file", "question_id", "question", "answer", "stage", "models", "ensemble", "final",
          "score", "start", "end", "page", "evidence", "bridge_entity", "correct", "corrected_answer", "notes"]


def answer_row(paper: str, text: str, question: str, answer: str, *, correct=None, corrected=None,
               stage: str = "extractive", entity: str | None = None, shift: int = 0) -> list:
    start = text.index(answer) + shift if answer in text else None
    end = start + len(answer) if start is not None else None
    return [paper, f"{paper}.pdf", question, "?", answer, stage, "m", False, True, 0.5, start, end, 1, "", entity,
            correct, corrected, None]


def write_sheet(path: Path, rows: list[list]) -> Path:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "answers"
    ws.append(HEADER)
    for row in rows:
        ws.append(row)
    wb.save(path)
    return path


def saved_as_csv(sheet: Path, path: Path) -> Path:
    """The answers sheet as Excel's "CSV UTF-8" saves it (a byte-order mark, blank cells empty)."""
    import csv

    from openpyxl import load_workbook

    rows = load_workbook(sheet)["answers"].iter_rows(values_only=True)
    with path.open("w", newline="", encoding="utf-8-sig") as f:
        csv.writer(f).writerows(["" if v is None else v for v in row] for row in rows)
    return path


@pytest.fixture
def coded_sheet(tmp_path: Path) -> Path:
    """Paper A coded for q1 and q2 (accepted, corrected, wrong, added, a correction not in the paper); paper B
    has rows nobody coded."""
    return write_sheet(tmp_path / "coded.xlsx", [
        answer_row("A", PAPER_A, "q1", "random forests", correct="yes"),
        answer_row("A", PAPER_A, "q1", "grid search", correct="no"),
        answer_row("A", PAPER_A, "q1", "Support vector", correct="no", corrected="Support vector machines"),
        answer_row("A", PAPER_A, "q1", "gradient boosting", correct="no", corrected="XGBoost"),
        answer_row("A", PAPER_A, "q2", "caret", stage="coder", correct="yes"),
        answer_row("A", PAPER_A, "q2", "R", correct="yes", shift=0),
        answer_row("B", PAPER_B, "q1", "Latent Dirichlet allocation"),
        answer_row("B", PAPER_B, "q2", "gensim"),
    ])


@pytest.fixture(scope="module")
def tiny_bert(tiny_models_dir: Path) -> Path:
    return tiny.build_tiny_models(tiny_models_dir, ["bert"])["bert"]
