"""The notebooks in notebooks/ run top to bottom with the tiny offline models, and are stored without outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlpsych.evaluation.evaluate import read_sheet

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_notebooks_are_there_and_stored_clean():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04"]
    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
        for cell in book.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: stored with outputs"


@pytest.fixture(scope="module")
def notebook_env(tiny_questions, tmp_path_factory):
    """Environment the notebooks read: tiny models (every window read: the fast preset's small reader is a Hub
    model), no LLM, one cache shared by all of them."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MLPSYCH_QUESTIONS", str(tiny_questions))
    mp.setenv("MLPSYCH_PRESET", "paper")
    mp.setenv("MLPSYCH_NORMALIZE", "0")
    mp.setenv("MLPSYCH_CACHE", str(tmp_path_factory.mktemp("notebook-cache")))
    mp.delenv("MLPSYCH_RUN_REAL", raising=False)
    yield
    mp.undo()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, notebook_env, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPSYCH_OUT", str(tmp_path / "out"))
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(book, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the cell on any error
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    written = {p.name for p in (tmp_path / "out").iterdir()}
    expected = {"01": {"results.xlsx"}, "02": {"my-questions.yaml", "my-answers.xlsx"},
                "03": {"results.xlsx", "eval.csv", "coded.xlsx", "agreement.md"},
                "04": {"mlpsych-dev.xlsx", "paper-table.md"}}[path.stem[:2]]
    assert expected <= written
    if sheet := {"01": "results.xlsx", "02": "my-answers.xlsx"}.get(path.stem[:2]):
        # they say each answer points to its page, and show it: the papers they read have pages
        found = [row for row in read_sheet(tmp_path / "out" / sheet, "answers") if row.get("start") is not None]
        assert found and all(row.get("page") for row in found)
