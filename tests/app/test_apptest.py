"""The Streamlit page driven by ``streamlit.testing`` (no browser): upload, run with tiny models, table, downloads."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from openpyxl import load_workbook  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app.py"
TIMEOUT = 240


@pytest.fixture(autouse=True)
def _templates(tmp_path, monkeypatch):
    monkeypatch.setenv("MLPSYCH_TEMPLATES", str(tmp_path / "templates"))


def page(tmp_path: Path, questions: Path | None = None) -> AppTest:
    """The page with a private cache, the fast preset, no LLM (slow on CPU) and optionally a question file."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    at.sidebar.text_input(key="cache_dir").input(str(tmp_path / "cache"))
    at.sidebar.radio(key="preset").set_value("fast")
    at.sidebar.checkbox(key="normalize").uncheck()
    if questions:
        at.sidebar.text_input(key="question_file").input(str(questions))
    at.run()
    assert not at.exception
    return at


def results(at: AppTest):
    """The answers table on the page (the one with an evidence column)."""
    tables = [d.value for d in at.dataframe if "evidence" in d.value.columns]
    assert len(tables) == 1
    return tables[0]


def captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption]


def test_page_loads_and_states_limits(tmp_path):
    at = page(tmp_path)
    assert at.title[0].value.startswith("mlpsych")
    assert any("200 MB" in c for c in captions(at))
    assert "200 MB" in at.file_uploader(key="uploads").label
    assert at.button(key="run").disabled  # nothing uploaded yet
    assert set(at.sidebar.radio(key="preset").options) >= {"paper: faithful to the paper (GPU)",
                                                          "fast: quick on a laptop CPU"}
    assert any("mlpsych (library)" == o for o in at.selectbox(key="template").options)


def test_bad_question_file_is_a_message_not_a_crash(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("questions:\n  - id: q 1\n    text: What?\n    models: [m]\n", encoding="utf-8")
    at = page(tmp_path, bad)
    assert not at.exception
    assert any("field 'id'" in e.value for e in at.error)
    assert at.button(key="run").disabled


def test_missing_folder_is_a_message(tmp_path):
    at = page(tmp_path)
    at.radio(key="paper_source").set_value("A folder on this machine")
    at.run()
    at.text_input(key="paper_folder").input(str(tmp_path / "nowhere"))
    at.run()
    assert [e.value for e in at.error] == [f"{tmp_path / 'nowhere'}: no such folder on this machine"]


def test_custom_question_form_saves_a_loadable_template(tmp_path):
    at = page(tmp_path)
    at.text_input(key="form_template").input("coding")
    at.text_input(key="form_id").input("n")
    at.text_area(key="form_text").input("How many participants took part?")
    at.selectbox(key="form_kind").set_value("number")
    at.button(key="FormSubmitter:question_form-Save question").click()
    at.run()
    assert not at.exception and not at.error
    saved = tmp_path / "templates" / "coding.yaml"
    from mlpsych.questions import load_question_set

    template = load_question_set(saved)
    assert [(q.id, q.kind, q.experimental) for q in template.questions] == [("n", "number", True)]
    assert "coding (mine)" in at.selectbox(key="template").options
    # a bad id: the loader's message, nothing saved
    at.text_input(key="form_id").input("bad id")
    at.button(key="FormSubmitter:question_form-Save question").click()
    at.run()
    assert any("Not saved" in e.value and "field 'id'" in e.value for e in at.error)
    assert [q.id for q in load_question_set(saved).questions] == ["n"]


@pytest.mark.slow
def test_upload_run_filter_download_rerun(tmp_path, tiny_questions, examples_dir):
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1"])
    papers = sorted((examples_dir / "papers").glob("*.txt"))
    files = [(p.name, p.read_bytes(), "text/plain") for p in papers]
    files.append(("../../broken paper.pdf", b"this is not a PDF at all", "application/pdf"))
    at.file_uploader(key="uploads").set_value(files)
    at.run()
    assert not at.button(key="run").disabled
    at.button(key="run").click()
    at.run()
    assert not at.exception, at.exception
    # the broken upload is reported on its own row (sanitized name), the others answered
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("broken_paper (broken_paper.pdf):") for w in warnings), warnings
    table = results(at)
    assert len(table) > 0 and set(table["question_id"]) == {"q1"}
    assert set(table["paper"]) <= {p.stem for p in papers} and table["evidence"].str.len().min() > 0
    assert table["page"].notna().all()
    first = [c for c in captions(at) if "cache:" in c][0]
    assert " 0 reused" in first

    at.multiselect(key="filter_p").set_value([papers[0].stem])
    at.run()
    filtered = results(at)
    assert 0 < len(filtered) < len(table) and set(filtered["paper"]) == {papers[0].stem}

    downloads = at.session_state["downloads"]
    book = load_workbook(io.BytesIO(downloads[".xlsx"]))
    assert book["answers"].max_row - 1 == len(table)
    assert "frequencies" in book.sheetnames
    assert downloads[".csv"].decode("utf-8").startswith("paper_id,source_file,question_id")

    at.button(key="run").click()  # same papers again: everything from the cache
    at.run()
    assert not at.exception
    again = [c for c in captions(at) if "cache:" in c][0]
    assert " 0 computed" in again
    assert len(results(at)) == len(table)
