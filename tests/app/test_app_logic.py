"""The app's logic without a browser: names, uploads, templates, presets, progress estimate, tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from openpyxl import load_workbook

from mlpsych.app import logic
from mlpsych.answers import Answer
from mlpsych.documents import Document
from mlpsych.pipeline import RunResult
from mlpsych.questions import load_question_set, parse_question_set
from mlpsych.settings import LLMSettings, RunSettings


@pytest.fixture(autouse=True)
def _templates(tmp_path, monkeypatch):
    monkeypatch.setenv("MLPSYCH_TEMPLATES", str(tmp_path / "templates"))


# -- names and uploads -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, safe", [
    ("paper.pdf", "paper.pdf"),
    ("../../etc/passwd.txt", "passwd.txt"),
    ("C:\\Users\\me\\..\\Study 1 (final).PDF", "Study_1_final.pdf"),
    ("..", "paper"),
    ("...txt", "paper.txt"),
    ("a..b.txt", "a.b.txt"),
    ("-rf.txt", "rf.txt"),
    ("Évaluation café.docx", "Evaluation_cafe.docx"),
    ("/abs/path/x.html", "x.html"),
    ("no_extension", "no_extension"),
    ("名前.txt", "paper.txt"),
    ("x" * 300 + ".pdf", "x" * 96 + ".pdf"),
])
def test_sanitize_filename(raw, safe):
    assert logic.sanitize_filename(raw) == safe


def test_sanitized_names_stay_inside_the_folder(tmp_path):
    for raw in ["../../x.txt", "/etc/x.txt", "..\\..\\x.txt", "a/../../b.txt", "~/.ssh/id.txt"]:
        name = logic.sanitize_filename(raw)
        assert "/" not in name and "\\" not in name and ".." not in name and not name.startswith(".")
        assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_unique_name():
    assert logic.unique_name("a.txt", set()) == "a.txt"
    assert logic.unique_name("a.txt", {"a.txt"}) == "a-2.txt"
    assert logic.unique_name("A.txt", {"a.txt", "a-2.txt"}) == "A-3.txt"


def test_save_uploads_sanitizes_dedupes_and_refuses(tmp_path):
    folder = tmp_path / "up"
    saved = logic.save_uploads([
        ("../../evil.txt", b"one"),
        ("dir/evil.txt", b"two"),
        ("virus.exe", b"MZ"),
        ("empty.txt", b""),
        ("big.txt", b"x" * 11),
    ], folder, max_bytes=10)
    assert [p.name for p in saved.paths] == ["evil.txt", "evil-2.txt"]
    assert [p.read_bytes() for p in saved.paths] == [b"one", b"two"]
    assert sorted(p.name for p in folder.iterdir()) == ["evil-2.txt", "evil.txt"]
    assert len(saved.refused) == 3
    assert saved.refused[0].startswith("virus.exe: unsupported file type")
    assert saved.refused[1] == "empty.txt: the file is empty"
    assert saved.refused[2] == "big.txt: larger than 0 MB"
    assert not (tmp_path / "evil.txt").exists()


def test_upload_suffixes_cover_papers():
    suffixes = logic.upload_suffixes()
    assert {"pdf", "txt", "docx", "html"} <= set(suffixes)
    assert all(not s.startswith(".") for s in suffixes)


def test_papers_in_folder(tmp_path):
    with pytest.raises(logic.AppInputError, match="type the path"):
        logic.papers_in_folder("  ")
    with pytest.raises(logic.AppInputError, match="no such folder"):
        logic.papers_in_folder(str(tmp_path / "missing"))
    (tmp_path / "notes.exe").write_bytes(b"x")
    with pytest.raises(logic.AppInputError, match="no papers here"):
        logic.papers_in_folder(str(tmp_path))
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "a.pdf").write_bytes(b"%PDF")
    (tmp_path / ".hidden.txt").write_text("h")
    assert [p.name for p in logic.papers_in_folder(f'"{tmp_path}"')] == ["a.pdf", "b.txt"]


def test_config_upload_limit_matches_the_page():
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == logic.MAX_UPLOAD_MB
    assert config["browser"]["gatherUsageStats"] is False


# -- templates ---------------------------------------------------------------------------------------------------

def test_template_choices_list_library_and_saved(tmp_path):
    choices = logic.template_choices()
    assert choices["mlpsych (library)"] == "mlpsych"
    path = logic.template_path("My set!")
    assert path == tmp_path / "templates" / "My_set.yaml"
    logic.save_question(logic.question_fields(id="n", text="How many took part?", kind="number", models="m"), path)
    assert logic.template_choices()["My_set (mine)"] == str(path)


def test_load_questions_errors_are_one_line():
    with pytest.raises(logic.AppInputError, match="not found"):
        logic.load_questions("no-such-template")
    with pytest.raises(logic.AppInputError, match="choose a question template"):
        logic.load_questions(" ")


def test_question_fields_from_a_form():
    entry = logic.question_fields(id=" n ", text="How many\n participants?", kind="number",
                                  models="a/b,\n c/d \n", top_k=3, allow_empty=True, bridge_from=" ")
    assert entry == {"id": "n", "text": "How many participants?", "kind": "number", "models": ["a/b", "c/d"],
                     "top_k": 3, "allow_empty": True, "merge": True, "experimental": True}


def test_save_question_adds_replaces_and_reloads(tmp_path):
    path = tmp_path / "templates" / "mine.yaml"
    first = logic.save_question(logic.question_fields(id="n", text="How many took part?", models="m1"), path)
    assert [q.id for q in first.questions] == ["n"]
    logic.save_question(logic.question_fields(id="c", text="In which country?", models="m1"), path)
    third = logic.save_question(logic.question_fields(id="n", text="How many people took part?", models="m2"), path)
    assert [q.id for q in third.questions] == ["c", "n"]
    assert third.get("n").text == "How many people took part?" and third.get("n").models == ["m2"]
    again = load_question_set(path)  # the project's loader reads what the app wrote
    assert [q.id for q in again.questions] == ["c", "n"] and again.get("c").experimental
    assert logic.remove_question("c", path) is not None
    assert [q.id for q in load_question_set(path).questions] == ["n"]
    assert logic.remove_question("n", path) is None and not path.exists()


def test_save_question_shows_the_loaders_message_and_writes_nothing(tmp_path):
    path = tmp_path / "bad.yaml"
    with pytest.raises(logic.AppInputError) as error:
        logic.save_question(logic.question_fields(id="has space", text="How many?", models="m"), path)
    assert "question 'has space'" in str(error.value) and "field 'id'" in str(error.value)
    assert not path.exists()
    with pytest.raises(logic.AppInputError, match="bridges from unknown question 'q9'"):
        logic.save_question(logic.question_fields(id="u", text="What was __PLACEHOLDER__ for?", models="m",
                                                  bridge_from="q9"), path)
    with pytest.raises(logic.AppInputError, match="field 'models'"):
        logic.save_question(logic.question_fields(id="u", text="What was used?", models=""), path)


def test_check_and_save_template_text(tmp_path):
    good = yaml.safe_dump({"name": "t", "questions": [{"id": "a", "text": "What country?", "models": ["m"]}]})
    assert [q.id for q in logic.check_template_text(good, "mine.yaml").questions] == ["a"]
    with pytest.raises(logic.AppInputError) as error:
        logic.check_template_text("questions:\n  - id: a\n    text: [unclosed", "mine.yaml")
    assert str(error.value).startswith("mine.yaml: cannot be read as YAML")
    with pytest.raises(logic.AppInputError, match="field 'top_k'"):
        logic.check_template_text(good.replace("models:", "top_k: 0\n  models:"), "mine.yaml")
    path = tmp_path / "t.yaml"
    with pytest.raises(logic.AppInputError):
        logic.save_template_text("questions: []", path)
    assert not path.exists()
    logic.save_template_text(good, path)
    assert load_question_set(path).name == "t"


def test_template_yaml_round_trips():
    library = load_question_set("mlpsych")
    text = logic.template_yaml(library)
    again = logic.check_template_text(text)
    assert [q.model_dump() for q in again.questions] == [q.model_dump() for q in library.questions]


# -- presets -----------------------------------------------------------------------------------------------------

def test_presets_offered():
    choices = logic.preset_choices()
    assert {"paper", "fast"} <= set(choices) and all(choices.values())


def test_build_run_applies_preset_and_page_switches():
    questions = load_question_set("mlpsych")
    paper_q, paper_s = logic.build_run(questions, "paper", device="cpu", normalize=True)
    assert paper_q.get("q1").models == questions.get("q1").models
    assert paper_s.preset == "paper" and paper_s.reader.device == "cpu" and paper_s.llm.enabled
    fast_q, fast_s = logic.build_run(questions, "fast", normalize=False, max_sub_questions=4)
    assert fast_q.get("q1").models != questions.get("q1").models  # base-size readers stand in
    assert fast_s.preset == "fast" and not fast_s.llm.enabled and fast_s.max_sub_questions == 4
    with pytest.raises(logic.AppInputError, match="unknown preset"):
        logic.build_run(questions, "turbo")


# -- progress ----------------------------------------------------------------------------------------------------

QS = parse_question_set({"questions": [
    {"id": "q1", "text": "Which methods?", "models": ["m1", "org/m2"], "normalize": {"prompt": "{answers}", "model": "L"}},
    {"id": "q2", "text": "Which software?", "models": ["m1"], "normalize": {"prompt": "{answers}", "model": "L"}},
    {"id": "q4", "text": "What was __PLACEHOLDER__ for?", "models": ["m1"], "bridge_from": "q1"},
]}, "inline")


def test_plan_steps_mirror_the_pipeline_labels():
    plan = logic.plan_steps(QS, RunSettings(llm=LLMSettings(enabled=True)), 3)
    assert [(s.label, s.total) for s in plan] == [
        ("q1,q2 · m1", 3), ("q1,q2 · org/m2", 3), ("normalize · L", 6), ("q4 · m1", 3)]
    plan = logic.plan_steps(QS, RunSettings(llm=LLMSettings(enabled=False)), 2)
    assert [(s.label, s.total) for s in plan] == [("q1,q2 · m1", 2), ("q1,q2 · org/m2", 2), ("q4 · m1", 2)]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_tracker_estimates_from_measured_progress():
    clock = Clock()
    tracker = logic.ProgressTracker(logic.plan_steps(QS, RunSettings(llm=LLMSettings(enabled=False)), 3), clock)
    assert tracker.total == 9 and tracker.seconds_left() is None
    assert "measured after the first paper" in tracker.describe()
    clock.now = 110.0
    tracker.update("q1,q2 · m1", 1, 3)
    assert tracker.seconds_left() == pytest.approx(80.0)  # 10 s per step, 8 steps left
    clock.now = 130.0
    tracker.update("q1,q2 · m1", 3, 3)  # paper 2's tick lost (it failed): counted by the next done
    clock.now = 140.0
    tracker.update("q1,q2 · org/m2", 1, 3)
    assert tracker.done == 4 and tracker.seconds_left() == pytest.approx(50.0)  # 40 s / 4 steps * 5 left
    clock.now = 150.0
    tracker.update("q1,q2 · org/m2", 2, 3)
    clock.now = 160.0
    tracker.update("q4 · m1", 1, 2)  # m2's last paper failed; one paper had no bridge entities
    assert [(s.done, s.total) for s in tracker.steps] == [(3, 3), (2, 2), (1, 2)]
    assert tracker.seconds_left() == pytest.approx(10.0)  # 60 s / 6 steps * 1 left
    assert tracker.fraction() == pytest.approx(6 / 7)
    assert tracker.describe() == ("q4 · m1: paper 1 of 2 · about 10 s left "
                                  "(measured: 6 of 7 steps in 1 min 00 s)")
    tracker.finish()
    assert tracker.fraction() == 1.0 and tracker.seconds_left() == 0.0


def test_tracker_repeated_labels_and_unplanned_stages():
    clock = Clock()
    steps = [logic.Step("normalize · L", 2), logic.Step("q4 · m1", 2), logic.Step("normalize · L", 2)]
    tracker = logic.ProgressTracker(steps, clock)
    tracker.update("normalize · L", 1, 2)
    tracker.update("normalize · L", 2, 2)
    tracker.update("normalize · L", 1, 2)  # the second level's normalization: q4 had nothing to read
    assert [(s.done, s.total) for s in tracker.steps] == [(2, 2), (0, 0), (1, 2)]
    tracker.update("other · x", 1, 1)
    assert tracker.steps[-1].label == "other · x"
    assert [(s.done, s.total) for s in tracker.steps] == [(2, 2), (0, 0), (1, 1), (1, 1)]  # moving on closes a stage


def test_format_seconds_and_short_stage():
    assert [logic.format_seconds(s) for s in (0, 59.4, 61, 3600, 3725)] == [
        "0 s", "59 s", "1 min 01 s", "1 h 00 min", "1 h 02 min"]
    assert logic.short_stage("q1,q2 · /tmp/tiny/deberta-v2/") == "q1,q2 · deberta-v2"
    assert logic.short_stage("normalize · meta-llama/Meta-Llama-3-8B-Instruct") == "normalize · Meta-Llama-3-8B-Instruct"


# -- run and tables ----------------------------------------------------------------------------------------------

def _result() -> RunResult:
    a = Document(id="a", text="We used random forests in R.", source_path="/up/a.txt")
    b = Document(id="b", text="We used BERT.", source_path="/up/b.pdf")
    answers = [
        Answer("a", "q1", "random forests", "extractive", ["/tmp/tiny/deberta-v2"], 0.9, 8, 22, 1, a.text, final=True),
        Answer("a", "q2", "R", "extractive", ["m1"], 0.5, 26, 27, 1, a.text, final=True),
        Answer("a", "q1", "forests", "extractive", ["m1"], 0.2, 15, 22, 1, a.text, final=False),
        Answer("b", "q1", "BERT", "extractive", ["m1", "org/m2"], 0.7, 8, 12, 1, b.text, ensemble=True, final=True),
    ]
    return RunResult(documents=[a, b], questions=QS, answers=answers, errors={"b": ["q1 with m1: boom"]},
                     info={"seconds": 1})


def test_results_table_and_filters():
    table = logic.results_table(_result())
    assert list(table.columns) == logic.RESULT_COLUMNS
    assert list(table["answer"]) == ["random forests", "R", "BERT"]  # final answers only
    assert list(table["models"]) == ["deberta-v2", "m1", "m1+m2"]
    assert list(table["page"]) == [1, 1, 1] and table["evidence"].iloc[2] == "We used BERT."
    assert list(logic.filter_results(table, ["q1"])["answer"]) == ["random forests", "BERT"]
    assert list(logic.filter_results(table, ["q1"], ["b"])["answer"]) == ["BERT"]
    assert list(logic.filter_results(table, text="IN R")["answer"]) == ["random forests", "R"]
    assert logic.filter_results(table, ["q9"]).empty
    empty = logic.results_table(RunResult(documents=[], questions=QS))
    assert empty.empty and list(logic.filter_results(empty, ["q1"]).columns) == logic.RESULT_COLUMNS


def test_status_table_shows_problems_per_paper():
    status = logic.status_table(_result())
    assert status.to_dict("records") == [
        {"paper": "a", "source_file": "a.txt", "pages": 1, "answers": 2, "status": "ok"},
        {"paper": "b", "source_file": "b.pdf", "pages": 1, "answers": 1, "status": "q1 with m1: boom"}]


def test_download_bytes_are_the_exporters_files(tmp_path):
    result = _result()
    xlsx = tmp_path / "r.xlsx"
    xlsx.write_bytes(logic.download_bytes(result, ".xlsx"))
    book = load_workbook(xlsx)
    assert {"papers", "answers", "frequencies", "run"} <= set(book.sheetnames)
    assert book["answers"].max_row == 4
    csv_text = logic.download_bytes(result, ".csv").decode("utf-8")
    assert csv_text.splitlines()[0].startswith("paper_id,source_file,question_id")
    assert len(csv_text.splitlines()) == 4
    with pytest.raises(ValueError):
        logic.download_bytes(result, ".ods")


def test_run_papers_reports_problems_instead_of_raising(tmp_path):
    missing = logic.run_papers(tmp_path / "nope", QS, RunSettings(), cache_dir=tmp_path / "c")
    assert missing.result is None and missing.error and "nope" in missing.error
    paper = tmp_path / "p.txt"
    paper.write_text("Participants (N = 20) were surveyed. We used random forests.", encoding="utf-8")
    bad_model = parse_question_set({"questions": [
        {"id": "q1", "text": "Which methods?", "models": [str(tmp_path / "no-model-here")]}]}, "inline")
    seen = []
    outcome = logic.run_papers([paper], bad_model, RunSettings(llm=LLMSettings(enabled=False)),
                               cache_dir=tmp_path / "c", on_documents=seen.append)
    assert outcome.result is None and outcome.error
    assert "no-model-here" in outcome.error and [d.id for d in seen[0]] == ["p"]
    assert isinstance(outcome.documents, list) and outcome.seconds >= 0
