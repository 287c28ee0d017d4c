"""The Streamlit page driven by ``streamlit.testing`` (no browser), one test per point of issue 17: the model check
and its ways forward, honest progress, the question form, results for coders, a run where nothing can be read."""

from __future__ import annotations

import gc
import io
import re
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from openpyxl import load_workbook  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from mlpsych.app import launch  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app.py"
TIMEOUT = 240


@pytest.fixture(autouse=True)
def _templates(tmp_path, monkeypatch, tiny_models_dir):
    monkeypatch.setenv("MLPSYCH_TEMPLATES", str(tmp_path / "templates"))
    monkeypatch.setenv("MLPSYCH_TINY_DIR", str(tiny_models_dir))  # the demo button reuses the tests' tiny models


def page(tmp_path: Path, questions: Path | None = None, script: Path = APP) -> AppTest:
    """The page with a private cache, the fast preset, no LLM (slow on CPU) and optionally a question file;
    ``script``: the checkout's app.py, or the page that ships in the package."""
    at = AppTest.from_file(str(script), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    at.sidebar.text_input(key="cache_dir").input(str(tmp_path / "cache"))
    at.sidebar.radio(key="preset").set_value("fast")
    at.sidebar.checkbox(key="normalize").set_value(False)
    if questions:
        from mlpsych.questions import load_question_set

        at.sidebar.text_input(key="question_file").input(str(questions))
        try:  # the fast preset's small reader: one of the file's own models, here (offline)
            at.sidebar.text_input(key="small_reader").input(load_question_set(questions).questions[0].models[0])
        except ValueError:  # a malformed file, which the page must report
            pass
    at.run()
    assert not at.exception
    return at


def results(at: AppTest):
    """The answers table on the page (the one with an evidence column)."""
    tables = [d.value for d in at.dataframe if "evidence" in d.value.columns]
    assert len(tables) == 1
    return tables[0]


def overview(at: AppTest):
    """The one-row-per-paper table on the page."""
    tables = [d.value for d in at.dataframe if list(d.value.columns[:1]) == ["paper"] and "pages" not in d.value
              and "evidence" not in d.value]
    assert len(tables) == 1
    return tables[0]


def progress_texts(at: AppTest) -> list[str]:
    return [p.proto.text for p in at.get("progress")]


def upload(at: AppTest, files: list[tuple[str, bytes, str]]) -> None:
    at.file_uploader(key="uploads").set_value(files)
    at.run()
    assert not at.button(key="run").disabled


def example_files(examples_dir: Path) -> list[tuple[str, bytes, str]]:
    return [(p.name, p.read_bytes(), "text/plain") for p in sorted((examples_dir / "papers").glob("*.txt"))]


def as_shown(markdown: str) -> str:
    """A message's markdown as the page shows it (its text, escapes resolved)."""
    import html

    from markdown_it import MarkdownIt

    return html.unescape(re.sub(r"<[^>]+>", "", MarkdownIt("commonmark").render(markdown))).strip()


def said(elements) -> list[str]:
    """The text of the page's alerts or captions (``at.error``, ``at.warning``, ...), as shown."""
    return [as_shown(e.value) for e in elements]


def captions(at: AppTest) -> list[str]:
    return said(at.caption)


@pytest.mark.parametrize("script", [APP, launch.PAGE], ids=["checkout app.py", "installed page"])
def test_page_loads_and_states_limits(tmp_path, script):
    """The checkout's app.py and the page `mlpsych app` runs from an installed mlpsych (the wheel had no page)."""
    at = page(tmp_path, script=script)
    assert at.title[0].value.startswith("mlpsych")
    assert any("200 MB" in c for c in captions(at))
    assert "200 MB" in at.file_uploader(key="uploads").label
    assert at.button(key="run").disabled  # nothing uploaded yet
    assert [o.split(" (")[0] for o in at.sidebar.radio(key="preset").options] == [
        "paper: the best answers", "fast: quick on a laptop CPU", "reference: the paper's code, to replicate it"]
    assert any("mlpsych (library)" == o for o in at.selectbox(key="template").options)


def test_the_pages_folder_is_off_sys_path_while_it_runs(monkeypatch):
    """Streamlit runs the page with mlpsych/app/ first on sys.path: the page's `logic`, `results`, `review` ...
    were top-level modules for everything imported in its process, shadowing installed packages of those names."""
    import logging
    import sys

    seen: list[list[str]] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: seen.append(list(sys.path)))  # after the imports
    at = AppTest.from_file(str(launch.PAGE), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception and seen
    assert str(launch.PAGE.parent) not in seen[0] and "mlpsych.app.logic" in sys.modules


def test_llm_stage_is_off_on_a_cpu_with_a_note(tmp_path):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    from mlpsych.app.logic import LLM_OFF_NOTE, has_accelerator

    if has_accelerator():
        pytest.skip("this machine has a GPU: the LLM stage is on by default")
    assert at.sidebar.checkbox(key="normalize").value is False
    assert LLM_OFF_NOTE in [c.value for c in at.sidebar.caption]


def test_first_run_download_is_announced_before_run(tmp_path, monkeypatch):
    from mlpsych import preflight

    monkeypatch.setattr(preflight, "cached_config", lambda model: None)
    monkeypatch.setattr(preflight, "offline_unless_reachable", lambda model: False)  # as if online
    at = page(tmp_path)
    notes = [i for i in said(at.info) if i.startswith("The first run downloads")]
    assert len(notes) == 1 and "GB in all" in notes[0] and "deepset/deberta-v3-base-squad2" in notes[0]


def test_bad_question_file_is_a_message_not_a_crash(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("questions:\n  - id: q 1\n    text: What?\n    models: [m]\n", encoding="utf-8")
    at = page(tmp_path, bad)
    assert not at.exception
    assert any("field 'id'" in e for e in said(at.error))
    assert at.button(key="run").disabled
    assert "mlpsych (library)" in at.selectbox(key="template").options  # the templates stay one click away


def test_missing_folder_is_a_message(tmp_path):
    at = page(tmp_path)
    at.radio(key="paper_source").set_value("A folder on this machine")
    at.run()
    at.text_input(key="paper_folder").input(str(tmp_path / "nowhere"))
    at.run()
    assert said(at.error) == [f"{tmp_path / 'nowhere'}: no such folder on this machine"]


SAVE = "FormSubmitter:question_form-Save question"
USE = "FormSubmitter:question_form-Use in this run without saving"


def test_custom_question_form_saves_a_loadable_template(tmp_path):
    at = page(tmp_path)
    at.text_input(key="form_template").input("coding")
    at.text_input(key="form_id").input("n")
    at.text_area(key="form_text").input("How many participants took part?")
    at.selectbox(key="form_kind").set_value("number")
    at.button(key=SAVE).click()
    at.run()
    assert not at.exception and not at.error
    saved = tmp_path / "templates" / "coding.yaml"
    from mlpsych.questions import load_question_set

    template = load_question_set(saved)
    assert [(q.id, q.kind, q.experimental) for q in template.questions] == [("n", "number", True)]
    assert "coding (mine)" in at.selectbox(key="template").options
    # a bad id: a plain message, nothing saved
    at.text_input(key="form_id").input("bad id")
    at.button(key=SAVE).click()
    at.run()
    assert said(at.error) == ["Not saved: the short name may hold only letters, digits and _ . - "
                                           "(no spaces)"]
    at.text_input(key="form_id").input("")
    at.button(key=SAVE).click()
    at.run()
    assert said(at.error) == ["Not saved: give the question a short name (its id), e.g. sample_size"]
    assert [q.id for q in load_question_set(saved).questions] == ["n"]


def test_start_from_fills_every_field_and_the_editor_follows_the_template(tmp_path):
    from mlpsych.questions import load_question_set

    at = page(tmp_path)
    q4 = load_question_set("mlpsych").get("q4")
    at.selectbox(key="edit_from").set_value("q4")
    at.run()
    assert at.text_input(key="form_id").value == "q4" and at.text_area(key="form_text").value == q4.text
    assert at.text_input(key="form_bridge").value == "q1" and at.number_input(key="form_top_k").value == q4.top_k
    assert at.checkbox(key="form_allow_empty").value == q4.allow_empty
    # change only the model and save: a variant of q4, in the user's template
    at.text_input(key="form_template").input("variant")
    at.text_area(key="form_models").input("my/reader")
    at.button(key=SAVE).click()
    at.run()
    assert not at.error, said(at.error)
    variant = load_question_set(tmp_path / "templates" / "variant.yaml")
    assert variant.get("q4").models == ["my/reader"] and variant.get("q4").text == q4.text
    assert variant.get("q4").retrieval == q4.retrieval  # what the form does not show is kept
    # picking the saved template: the form and the YAML editor show it
    at.selectbox(key="template").set_value("variant (mine)")
    at.run()
    editor = [t for t in at.text_area if t.key.startswith("yaml_text:")]
    assert len(editor) == 1 and "my/reader" in editor[0].value
    assert at.selectbox(key="edit_from").options == ["(new question)", "q1", "q4"]


def test_form_offers_models_on_this_machine_first(tmp_path, tiny_questions):
    from mlpsych.questions import load_question_set

    at = page(tmp_path, tiny_questions)
    tiny = load_question_set(tiny_questions).questions[0].models[0]
    assert at.text_area(key="form_models").value == tiny  # a new question starts with a model that is here
    assert any(c.startswith("Models on this machine: ") and tiny in c for c in captions(at))


def test_a_typed_question_runs_without_saving(tmp_path, tiny_questions, examples_dir):
    from mlpsych.questions import load_question_set

    at = page(tmp_path, tiny_questions)
    at.text_input(key="form_id").input("n")
    at.text_area(key="form_text").input("How many participants took part?")
    at.button(key=USE).click()
    at.run()
    assert not at.error and not at.exception
    assert any(c == "Also asked in this run (not saved): n" for c in captions(at))
    assert not (tmp_path / "templates").exists()
    assert [q.id for q in load_question_set(tiny_questions).questions] == ["q1", "q2", "q3", "q4"]
    at.multiselect(key="picked_questions").set_value(["n"])
    upload(at, example_files(examples_dir)[:1])
    at.button(key="run").click()
    at.run()
    assert not at.exception and not at.error, said(at.error)
    assert list(overview(at).columns) == ["paper", "n", "status"]


def test_a_missing_model_fails_fast_in_red_with_two_ways_forward(tmp_path, examples_dir, tiny_models):
    questions = tmp_path / "hub.yaml"
    questions.write_text("questions:\n  - id: q1\n    text: Which methods were used?\n"
                         "    models: [mlpsych-test/no-such-reader-squad2]\n", encoding="utf-8")
    at = page(tmp_path, questions)
    upload(at, example_files(examples_dir)[:2])
    started = time.monotonic()
    at.button(key="run").click()
    at.run()
    assert time.monotonic() - started < 5
    assert not at.exception
    (error,) = said(at.error)
    assert error.startswith("The run did not start") and "mlpsych-test/no-such-reader-squad2" in error
    assert "cannot be reached to download it" in error
    assert not any("Finished" in t for t in progress_texts(at))  # a failed run never says 'Finished'
    assert any("Question file path" in c for c in captions(at))
    assert at.session_state["outcome"].documents == []  # no paper was read
    # the tiny demo models on the same papers, one click
    at.button(key="demo").click()
    at.run()
    assert not at.exception and not at.error, said(at.error)
    assert at.session_state["question_file"].endswith("questions.yaml")
    assert any(t.startswith("Finished in") for t in progress_texts(at))
    assert len(results(at)) > 0


def test_a_model_that_fails_to_load_ends_red_not_finished(tmp_path, examples_dir):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{}", encoding="utf-8")  # passes the check, fails to load
    questions = tmp_path / "broken.yaml"
    questions.write_text(f"questions:\n  - id: q1\n    text: Which methods were used?\n    models: ['{broken}']\n",
                         encoding="utf-8")
    at = page(tmp_path, questions)
    upload(at, example_files(examples_dir)[:1])
    at.button(key="run").click()
    at.run()
    assert not at.exception
    (error,) = said(at.error)
    assert error.startswith("The run failed after") and "broken-model" in error
    assert not any("Finished" in t for t in progress_texts(at)) and not at.get("download_button")


def test_nothing_readable_ends_with_a_summary_and_no_downloads(tmp_path, tiny_questions):
    at = page(tmp_path, tiny_questions)
    upload(at, [("broken.pdf", b"this is not a PDF", "application/pdf"),
                ("scan.pdf", b"%PDF-1.4 truncated", "application/pdf")])
    at.button(key="run").click()
    at.run()
    assert not at.exception
    (error,) = said(at.error)
    assert error.startswith("Nothing to answer: none of the 2 file(s) could be read")
    assert not any("Finished" in t for t in progress_texts(at))
    assert not at.session_state["downloads"]
    assert not at.get("download_button")
    (status,) = [d.value for d in at.dataframe]
    assert list(status["paper"]) == ["broken", "scan"] and (status["status"] != "ok").all()


@pytest.mark.slow
def test_upload_run_overview_filter_download_rerun(tmp_path, tiny_questions, examples_dir):
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1", "q3", "q4"])
    files = example_files(examples_dir)
    papers = [Path(name).stem for name, _, _ in files]
    same = files[0]
    files += [(Path(same[0]).stem + ".md", same[1], "text/markdown"),  # one paper in two formats
              ("../../broken paper.pdf", b"this is not a PDF at all", "application/pdf")]
    upload(at, files)
    at.button(key="run").click()
    at.run()
    assert not at.exception, at.exception
    assert any(t.startswith("Finished in") for t in progress_texts(at))
    warnings = said(at.warning)
    assert any(w.startswith("broken_paper (broken_paper.pdf):") for w in warnings), warnings
    assert any(w.startswith(f"{same[0]} and {Path(same[0]).stem}.md share a name") for w in warnings), warnings
    # one row per paper, with an explicit 'no answer' or 'not read'
    rows = overview(at).set_index("paper")
    assert sorted(rows.index) == sorted([*papers, f"{papers[0]}-2", "broken_paper"])
    assert rows.loc["broken_paper", "q1"] == "(not read)"
    assert (rows[["q1", "q3", "q4"]] != "").all().all()
    table = results(at)
    assert set(table["question_id"]) <= {"q1", "q3", "q4"} and table["page"].isna().all()  # .txt: no page made up
    follow_ups = table[table["question_id"] == "q4"]
    assert len(follow_ups) and (follow_ups["technique"].str.len() > 0).all()
    assert table["evidence"].str.len().min() > 0
    first = [c for c in captions(at) if "cache:" in c][0]
    assert " 0 computed" not in first
    assert at.multiselect(key="filter_q").options == ["q1", "q3", "q4"]  # every question, answered or not

    at.multiselect(key="filter_p").set_value([papers[1]])
    at.run()
    filtered = results(at)
    assert 0 < len(filtered) < len(table) and set(filtered["paper"]) == {papers[1]}
    (button,) = [b for b in at.get("download_button") if "Download filtered" in b.proto.label]
    assert f"({len(filtered)} answers)" in button.proto.label

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
    assert at.multiselect(key="filter_p").value == [papers[1]]  # the filter on screen applies to the new run
    assert results(at).equals(filtered)


@pytest.mark.slow
def test_uploaded_papers_are_kept_while_the_session_lasts_and_removed_with_it(tmp_path, tiny_questions,
                                                                               examples_dir):
    def session() -> Path:
        at = page(tmp_path, tiny_questions)
        at.multiselect(key="picked_questions").set_value(["q1"])
        upload(at, example_files(examples_dir)[:1])
        at.button(key="run").click()
        at.run()
        assert not at.exception, at.exception
        folder = at.session_state["upload_root"].path
        assert [p.name for p in folder.iterdir()] == ["run-1"] and any((folder / "run-1").iterdir())
        return folder

    folder = session()
    gc.collect()  # the session's state is gone (Streamlit drops it when the browser leaves)
    assert not folder.exists()


def test_demo_answers_are_labelled_on_the_page_and_in_the_downloads(tmp_path, tiny_questions, examples_dir):
    from mlpsych.app import results as results_module
    from mlpsych.models import DEMO_NOTE

    at = page(tmp_path, tiny_questions)  # the tiny random-weight models, as the demo button sets them
    at.multiselect(key="picked_questions").set_value(["q1"])
    upload(at, example_files(examples_dir)[:1])
    at.button(key="run").click()
    at.run()
    assert not at.exception and not at.error
    banner = [w for w in said(at.warning) if "Demo answers, not real ones" in w]
    assert len(banner) == 1 and "random-weight" in banner[0]
    outcome = at.session_state["outcome"]
    assert results_module.download_name(outcome.result, ".xlsx") == "results-DEMO-random-models.xlsx"
    book = load_workbook(io.BytesIO(at.session_state["downloads"][".xlsx"]))
    assert next(book["run"].iter_rows(min_row=2, max_row=2, values_only=True)) == ("NOTE", DEMO_NOTE)


def test_a_run_that_cannot_start_says_so_right_below_the_run_button_and_scrolls_there(tmp_path, examples_dir):
    questions = tmp_path / "hub.yaml"
    questions.write_text("questions:\n  - id: q1\n    text: Which methods were used?\n"
                         "    models: [mlpsych-test/no-such-reader-squad2]\n", encoding="utf-8")
    at = page(tmp_path, questions)
    upload(at, example_files(examples_dir)[:1])
    at.button(key="run").click()
    at.run()

    def below_run_button() -> list:
        items = list(at.main.children.values())
        start = next(i for i, e in enumerate(items) if getattr(e, "key", None) == "run") + 1
        return [e for e in items[start:] if e.type != "empty"]  # (the emptied progress bar)

    failure, scroll, *_ = below_run_button()
    assert failure.key == "run_failure" and as_shown(failure.error[0].value).startswith("The run did not start")
    assert failure.button(key="demo").label == "Run the tiny demo models on the same papers"
    assert scroll.type == "iframe" and "scrollIntoView" in scroll.proto.srcdoc  # brought into view at 1400x1000
    at.run()  # any later rerun: the message stays where it was, the page is not moved again
    failure, after, *_ = below_run_button()
    assert failure.key == "run_failure" and after.type != "iframe"


def test_filters_left_on_screen_apply_to_the_next_run(tmp_path, tiny_questions, examples_dir):
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1"])
    files = example_files(examples_dir)[:2]
    upload(at, files)
    at.button(key="run").click()
    at.run()
    table = results(at)
    word = max(" ".join(table["answer"]).split(), key=len)  # a word some answers hold, not all of them
    at.text_input(key="filter_text").input(word)
    at.multiselect(key="filter_q").set_value(["q1"])
    at.run()
    assert 0 < len(results(at)) < len(table)
    at.multiselect(key="picked_questions").set_value(["q3"])  # a new run with another question
    at.button(key="run").click()
    at.run()
    assert not at.exception
    # what the box says is what the table shows: the text still filters, the question no longer asked is dropped
    assert at.text_input(key="filter_text").value == word and at.multiselect(key="filter_q").value == []
    shown = results(at)
    assert set(shown["question_id"]) <= {"q3"}
    assert all(word.casefold() in " ".join(map(str, row)).casefold()
               for row in shown[["answer", "evidence", "technique"]].itertuples(index=False))
    (summary,) = [c for c in captions(at) if c.endswith(" answers") and " of " in c]
    assert summary.startswith(f"{len(shown)} of ")


def test_presets_say_what_they_cost_on_a_machine_without_a_gpu(tmp_path):
    from mlpsych.app.logic import has_accelerator

    if has_accelerator():
        pytest.skip("this machine has a GPU: the presets say which need one")
    options = page(tmp_path).sidebar.radio(key="preset").options
    assert not any("GPU)" in o and "without a GPU" not in o for o in options), options  # no "(GPU)" where none is
    assert options[0] == "paper: the best answers (without a GPU, 10 min or more per paper)"
    assert all(re.search(r"\d+ (s|min|min or more) per paper\)$", o) for o in options), options


def test_a_saved_question_is_no_longer_listed_as_not_saved(tmp_path):
    at = page(tmp_path)
    at.text_input(key="form_id").input("n")
    at.text_area(key="form_text").input("How many participants took part?")
    at.button(key=USE).click()
    at.run()
    assert "Also asked in this run (not saved): n" in captions(at)
    at.button(key=SAVE).click()
    at.run()
    assert not at.error, said(at.error)
    assert not any("(not saved)" in c for c in captions(at))
    assert "Also asked in this run: n (saved in my-questions.yaml)" in captions(at)
    assert (tmp_path / "templates" / "my-questions.yaml").is_file()


def test_a_question_file_in_the_sidebar_says_where_it_comes_from_and_what_it_is(tmp_path, tiny_questions):
    at = page(tmp_path, tiny_questions)
    assert at.selectbox(key="template").value == "questions.yaml (question file in the sidebar)"
    (about,) = [c for c in captions(at) if c.startswith("From the question file set in the sidebar")]
    assert str(tiny_questions) in about and "random-weight" in about
    assert "best configuration per question" not in about  # the library template's description was shown
    assert at.multiselect(key="picked_questions").placeholder == "All 4 questions of the template"


def test_a_file_that_is_not_what_its_name_says_is_described_not_dumped(tmp_path, tiny_questions, examples_dir):
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1"])
    upload(at, [*example_files(examples_dir)[:1], ("notes.pdf", b"hello world, I am the notes\n", "application/pdf"),
                ("blob.pdf", bytes(range(7, 250)), "application/pdf")])
    at.button(key="run").click()
    at.run()
    assert not at.exception
    notices = {w.split(" ")[0]: w for w in said(at.warning) if w.startswith(("notes", "blob"))}
    assert notices["notes"] == "notes (notes.pdf): not a PDF (it is plain text: a text file saved with a .pdf name?)"
    assert notices["blob"] == "blob (blob.pdf): not a PDF (it is binary content of an unknown kind)"


def test_the_progress_line_estimates_the_follow_ups_only_once_they_are_counted(tmp_path, tiny_questions,
                                                                              examples_dir, monkeypatch):
    from mlpsych.estimate import LiveEstimate

    shown: list[str] = []
    update = LiveEstimate.update

    def recording(self, event) -> None:  # what the bar says after each of the pipeline's events
        update(self, event)
        shown.append(self.tracker.describe())

    monkeypatch.setattr(LiveEstimate, "update", recording)
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1", "q4"])
    upload(at, example_files(examples_dir)[:2])
    at.button(key="run").click()
    at.run()
    assert not at.exception and not at.error
    known = next(i for i, line in enumerate(shown) if "estimating" not in line)  # q4 counted: a time left
    assert 0 < known <= next(i for i, line in enumerate(shown) if "sub-question" in line), shown
    assert all("estimating the time left until q4's follow-ups are counted" in line for line in shown[:known])
    assert all(re.search(r" · (about [1-9]\d* (s|min)|finishing)", line) for line in shown[known:]), shown
    assert not any("about 0 s left" in line for line in shown)
    assert all("deberta" not in line and "albert" not in line for line in shown)  # the questions are named
    assert any(line.startswith("answering q1 (What machine learning or natural language …)") for line in shown)


def run_one_paper(tmp_path: Path, tiny_questions: Path, paper: tuple[str, bytes, str]) -> AppTest:
    """A session that has run q1 of the tiny models on one paper."""
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1"])
    upload(at, [paper])
    at.button(key="run").click()
    at.run()
    assert not at.exception and not at.error, said(at.error)
    return at


def test_a_new_sessions_review_never_opens_or_overwrites_an_earlier_one(tmp_path, tiny_questions, examples_dir,
                                                                        monkeypatch):
    """The page proposed review-1.xlsx in every new session: the second session's 'Review these answers' opened the
    first session's coding (refused as 'papers not among the papers given') after overwriting its saved texts."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = tmp_path / "home" / "mlpsych-reviews"
    one, two = example_files(examples_dir)[:2]
    first = run_one_paper(tmp_path, tiny_questions, one)
    assert first.text_input(key="review_path").value == str(folder / "review-1.xlsx")
    first.button(key="review_start").click().run()
    assert not first.error and first.session_state["review_sheet"].papers() == [Path(one[0]).stem]
    kept = (folder / "review-1-texts.jsonl").read_bytes()

    second = run_one_paper(tmp_path, tiny_questions, two)  # a new session (a reload, another day)
    assert second.text_input(key="review_path").value == str(folder / "review-2.xlsx")
    second.button(key="review_start").click().run()
    assert not second.error and second.session_state["review_sheet"].papers() == [Path(two[0]).stem]
    second.text_input(key="review_path").input(str(folder / "review-1.xlsx"))  # the earlier review, typed
    second.button(key="review_start").click().run()
    (error,) = said(second.error)
    assert "already exists and holds another run's answers" in error
    assert (folder / "review-1-texts.jsonl").read_bytes() == kept  # the first review's papers are untouched
    first.button(key="review_start").click().run()  # the same run's own file: the review continues it
    assert not first.error and first.session_state["review_sheet"].papers() == [Path(one[0]).stem]


def test_an_empty_upload_is_listed_with_its_status_in_the_results_and_the_download(tmp_path, tiny_questions,
                                                                                    examples_dir):
    """An empty file was refused at upload with a warning gone at the next click, and missing from the
    spreadsheet's papers sheet: a study of 40 files downloaded 39 rows."""
    paper = example_files(examples_dir)[0]
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1"])
    upload(at, [paper, ("notes.txt", b"", "text/plain")])
    at.button(key="run").click()
    at.run()
    assert not at.exception
    at.text_input(key="filter_text").input("").run()  # any later click: what the page says must still be there
    status = next(d.value for d in at.dataframe if "pages" in d.value.columns).set_index("paper")
    assert status.loc["notes", "status"] == "empty file" and status.loc[Path(paper[0]).stem, "status"] == "ok"
    assert any(w.startswith("notes (notes.txt): empty file") for w in said(at.warning))
    book = load_workbook(io.BytesIO(at.session_state["downloads"][".xlsx"]))
    rows = {r[0]: r[2] for r in book["papers"].iter_rows(min_row=2, values_only=True)}
    assert rows == {Path(paper[0]).stem: "ok", "notes": "empty file"}


def test_a_paper_read_with_pages_without_text_says_so_on_the_page(tmp_path, tiny_questions, examples_dir):
    """The note that a PDF's page had no text (a scanned table) stayed in the texts' metadata: the page showed the
    paper "ok" and its missing answers as none."""
    from mlpsych.dev.synth import pdf_with_a_page_without_text

    pdf_with_a_page_without_text(tmp_path / "scanned-table.pdf")
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1"])
    upload(at, [example_files(examples_dir)[0], ("scanned-table.pdf", (tmp_path / "scanned-table.pdf").read_bytes(),
                                                  "application/pdf")])
    at.button(key="run").click()
    at.run()
    assert not at.exception
    note = "pages without text (images? OCR them to include them): 2"
    assert said(at.info) == [f"scanned-table (scanned-table.pdf) was read with a note: {note} (answers may be missing "
                             "from what could not be read)"]
    status = next(d.value for d in at.dataframe if "pages" in d.value.columns).set_index("paper")
    assert status.loc["scanned-table", "status"] == "ok" and status.loc["scanned-table", "text_notes"] == note


def test_a_review_started_here_continues_after_a_reload_with_its_own_papers_and_questions(
        tmp_path, tiny_questions, examples_dir, monkeypatch):
    """After a reload, continuing a review of uploaded papers asked for papers the coder no longer had at hand (the
    texts kept beside the sheet were never offered), and the re-read commands named the library's questions, not
    the run's."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    paper = example_files(examples_dir)[0]
    first = run_one_paper(tmp_path, tiny_questions, paper)
    first.button(key="review_start").click().run()
    sheet = first.session_state["review_sheet"]
    row = sheet.items(Path(paper[0]).stem)[0].row
    first.radio(key=f"mark:{first.session_state['review_id']}:{row}").set_value("wrong").run()

    again = AppTest.from_file(str(APP), default_timeout=TIMEOUT)  # the page reloaded: a new session
    again.run()
    again.text_input(key="review_open_path").input(str(sheet.path))  # the papers left blank
    again.button(key="review_open").click().run()
    assert not again.exception and not again.error, said(again.error)
    assert again.radio(key=f"mark:{again.session_state['review_id']}:{row}").value == "wrong"
    commands = next(c.value for c in again.code if "mlpsych adapt" in c.value)
    texts, questions = (sheet.path.with_name(sheet.path.stem + end) for end in ("-texts.jsonl", "-questions.yaml"))
    assert f"--texts {texts}" in commands and f"--questions {questions}" in commands



PIXEL = "![p](http://127.0.0.1:9/pixel.png)"  # a tracking pixel, as a markdown image


def test_ids_a_jsonl_or_question_file_chose_are_shown_as_written_never_fetched(tmp_path, tiny_questions):
    """A paper id or status from an uploaded .jsonl, or a model id from a question file, written as a markdown image
    was rendered by the page's warnings and errors: the researcher's browser fetched its address (checked in
    Chromium: a request to the pixel's host)."""
    import json

    from markdown_it import MarkdownIt

    def on_the_page(at: AppTest) -> list[str]:
        return [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success")
                for e in getattr(at, kind)]

    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(f"questions:\n  - id: q1\n    text: Which methods were used?\n    models: ['{PIXEL}']\n",
                       encoding="utf-8")
    at = page(tmp_path, hostile)
    upload(at, [("a.txt", b"We used random forests in R. " * 20, "text/plain")])
    at.button(key="run").click().run()
    assert not at.exception and at.error
    shown = on_the_page(at)  # the model check's error names the model
    at = page(tmp_path, tiny_questions)
    at.multiselect(key="picked_questions").set_value(["q1"])
    records = [{"id": f"paper {PIXEL}", "source_path": "x.pdf", "status": f"corrupt {PIXEL}"},
               {"id": "good", "source_path": "good.txt", "text": "We used random forests in R. " * 20}]
    upload(at, [("texts.jsonl", "\n".join(json.dumps(r) for r in records).encode("utf-8"), "application/json")])
    at.button(key="run").click().run()
    assert not at.exception
    shown += on_the_page(at)  # the papers' status warnings
    for markdown in shown:
        rendered = MarkdownIt("commonmark").render(markdown)
        assert "<img" not in rendered and "<a " not in rendered, rendered
    texts = [as_shown(markdown) for markdown in shown]
    assert any(f"reader {PIXEL} (size unknown to download): not on this machine" in t for t in texts), texts
    assert any(f"paper {PIXEL} (x.pdf): corrupt {PIXEL}" in t for t in texts), texts


def test_a_filter_on_a_finished_run_writes_no_workbook_until_its_download_is_clicked(monkeypatch):
    """The filtered workbook was written on every redraw while a filter was set: each click on a 1,000-paper run's
    page took minutes. It is made when its button is clicked."""
    from mlpsych import export
    from mlpsych.answers import Answer
    from mlpsych.app.runner import RunOutcome
    from mlpsych.documents import Document
    from mlpsych.pipeline import RunResult
    from mlpsych.questions import load_question_set

    text = "We used random forests in R. Support vector machines were the baseline."
    docs = [Document(f"p{i}", text, source_path=f"/papers/p{i}.txt") for i in range(3)]
    answers = [Answer(d.id, "q1", name, "extractive", ["m"], 0.5, text.index(name), text.index(name) + len(name),
                      None, text, final=True, confidence=0.5)
               for d in docs for name in ("random forests", "Support vector machines")]
    written = []
    write = export.write_result
    monkeypatch.setattr(export, "write_result", lambda *args: written.append(args[1]) or write(*args))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    at.session_state["outcome"] = RunOutcome(result=RunResult(docs, load_question_set("mlpsych").select(["q1"]),
                                                              answers), documents=docs, seconds=1.0)
    at.session_state["downloads"] = {}
    at.run()
    at.multiselect(key="filter_p").set_value(["p1"]).run()
    at.run()
    assert not at.exception
    assert list(results(at)["paper"]) == ["p1", "p1"]
    (button,) = [b for b in at.get("download_button") if "Download filtered" in b.proto.label]
    assert "(2 answers)" in button.proto.label
    assert written == []
