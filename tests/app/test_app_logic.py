"""The app's logic without a browser: names, uploads, templates (and the form's plain messages), presets."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mlpsych.app import logic
from mlpsych.questions import load_question_set


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
    assert [p.name for p in saved.paths] == ["evil.txt", "evil-2.txt", "empty.txt"]  # empty: read as 'empty file'
    assert [p.read_bytes() for p in saved.paths] == [b"one", b"two", b""]
    assert sorted(p.name for p in folder.iterdir()) == ["empty.txt", "evil-2.txt", "evil.txt"]
    assert len(saved.refused) == 2
    assert saved.refused[0].startswith("virus.exe: unsupported file type")
    assert saved.refused[1] == "big.txt: larger than 0 MB"
    assert not (tmp_path / "evil.txt").exists()


def test_an_upload_folder_is_removed_with_the_session_that_made_it():
    upload = logic.UploadFolder()
    folder = upload.path
    saved = logic.save_uploads([("paper.txt", b"one")], folder / "run-1")
    assert saved.paths[0].read_bytes() == b"one" and folder.name.startswith("mlpsych-uploads-")
    del upload  # the session's state dropped: the papers are not left on the server's disk
    assert not folder.exists()


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
    """The checkout's .streamlit/config.toml and `mlpsych app` (an installed mlpsych has no such file) set the same
    server: the upload limit the page states, only this machine, no telemetry."""
    import tomllib

    from mlpsych.app.launch import SERVER_OPTIONS

    config = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    flat = {f"{section}.{name}": value for section, options in config.items() for name, value in options.items()}
    assert flat == SERVER_OPTIONS
    assert config["server"]["maxUploadSize"] == logic.MAX_UPLOAD_MB
    assert config["server"]["address"] == "localhost"
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


def test_a_follow_up_saves_with_its_earlier_question(tmp_path):
    library = load_question_set("mlpsych")
    q4 = logic.question_fields(id="q4", text=library.get("q4").text, models="my/reader", bridge_from="q1")
    path = tmp_path / "variant.yaml"
    saved = logic.save_question(q4, path, context=library)
    assert [q.id for q in saved.questions] == ["q1", "q4"] and saved.get("q1").models == library.get("q1").models
    assert saved.get("q4").models == ["my/reader"]
    with pytest.raises(logic.AppInputError, match="bridges from unknown question 'q1'"):
        logic.save_question(q4, tmp_path / "alone.yaml")  # without the template it came from


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
    assert fast_s.retrieval.cascade.model == logic.FAST_SMALL_READER == "deepset/minilm-uncased-squad2"
    _, local = logic.build_run(questions, "fast", small_reader="/models/minilm")  # a folder: offline
    assert local.retrieval.cascade.model == "/models/minilm"
    _, paper = logic.build_run(questions, "paper", small_reader="/models/minilm")  # no cascade: nothing to set
    assert paper.retrieval.cascade.model is None
    with pytest.raises(logic.AppInputError, match="unknown preset"):
        logic.build_run(questions, "turbo")


# -- the question form -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, plain", [
    (dict(id="", text="How many?", models="m"), "give the question a short name (its id), e.g. sample_size"),
    (dict(id="a b", text="How many?", models="m"),
     "the short name may hold only letters, digits and _ . - (no spaces)"),
    (dict(id="n", text="", models="m"), "type the question itself (a few words at least)"),
    (dict(id="n", text="How many?", models=""), "name at least one model, one per line"),
    (dict(id="n", text="What was __PLACEHOLDER__ for?", models="m", bridge_from="q9"),
     "it follows up question 'q9', which is not in this template"),
    (dict(id="n", text="What was it for?", models="m", bridge_from="q1"),
     "a follow-up question needs __PLACEHOLDER__ where the earlier answer goes"),
])
def test_form_mistakes_are_said_in_plain_words(tmp_path, fields, plain):
    with pytest.raises(logic.AppInputError) as error:
        logic.with_question(load_question_set("mlpsych").select(["q1"]), logic.question_fields(**fields))
    assert logic.plain_error(str(error.value)) == plain
    assert logic.plain_error("x.yaml: something else") == "x.yaml: something else"


def _fields(values: dict) -> dict:
    """The form's widget values as ``question_fields`` arguments (what the page passes on save)."""
    return {key.removeprefix("form_").replace("bridge", "bridge_from"): value for key, value in values.items()}


def test_form_values_fill_every_field_and_round_trip():
    library = load_question_set("mlpsych")
    q4 = library.get("q4")
    values = logic.form_values(q4, ["here/model"])
    assert values == {"form_id": "q4", "form_text": q4.text, "form_kind": q4.kind, "form_models": "\n".join(q4.models),
                      "form_top_k": q4.top_k, "form_allow_empty": q4.allow_empty, "form_merge": q4.merge,
                      "form_bridge": "q1"}
    # saving the filled form unchanged gives back the same question (the form loses nothing it shows)
    entry = logic.question_fields(**_fields(values))
    again = logic.with_question(library, entry).get("q4")
    assert (again.text, again.models, again.bridge_from, again.top_k) == (q4.text, q4.models, "q1", q4.top_k)
    # what the form does not show is kept from the question it started from
    q1 = library.get("q1")
    assert q1.normalize is not None and q1.retrieval is not None
    variant = logic.question_fields(**{**_fields(logic.form_values(q1, [])), "models": "my/reader"}, based_on=q1)
    kept = logic.with_question(library, variant).get("q1")
    assert kept.models == ["my/reader"] and kept.normalize == q1.normalize and kept.retrieval == q1.retrieval
    blank = logic.form_values(None, ["here/model", "other"])
    assert blank["form_id"] == "" and blank["form_models"] == "here/model"


def test_with_question_adds_or_replaces_without_saving(tmp_path):
    library = load_question_set("mlpsych").select(["q1"])
    added = logic.with_question(library, logic.question_fields(id="n", text="How many took part?", models="m"))
    assert [q.id for q in added.questions] == ["q1", "n"]
    replaced = logic.with_question(added, logic.question_fields(id="n", text="How many people?", models="m"))
    assert [q.id for q in replaced.questions] == ["q1", "n"] and replaced.get("n").text == "How many people?"
    assert not list(tmp_path.glob("**/*.yaml"))


def test_readme_shows_a_small_screenshot_of_a_finished_run():
    repo = Path(__file__).resolve().parents[2]
    shot = repo / "docs" / "app-finished-run.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size < 200_000
    assert "(docs/app-finished-run.png)" in (repo / "README.md").read_text(encoding="utf-8")


def test_progress_names_the_questions_not_the_models():
    from mlpsych.estimate import ProgressTracker
    from mlpsych.progress import ProgressEvent
    from mlpsych.questions import load_question_set

    labels = logic.progress_labels(load_question_set("mlpsych"))
    assert labels["q1"] == "What machine learning or natural language …" and labels["q4"] == "What was … used for?"
    tracker = ProgressTracker([ProgressEvent("read", ("q4",), "/tmp/tiny/deberta-v2", 0, 3, "sub-question")],
                              labels=labels)
    tracker.update(ProgressEvent("read", ("q4",), "/tmp/tiny/deberta-v2", 1, 3, "sub-question"))
    assert tracker.describe().startswith("answering q4 (What was … used for?): sub-question 1 of 3 · about ")
    assert "deberta" not in tracker.describe()


def test_preset_labels_say_gpu_only_where_there_is_one():
    assert logic.preset_label("paper", gpu=True) == "paper: the best answers (GPU)"
    assert logic.preset_label("fast", gpu=True) == "fast: quick on a laptop CPU"
    assert logic.preset_label("reference", gpu=False) == ("reference: the paper's code, to replicate it "
                                                          "(without a GPU, 5-12 min per paper)")


def test_leave_sys_path_takes_off_only_the_pages_folder(tmp_path, monkeypatch):
    """`streamlit run mlpsych/app/page.py` puts mlpsych/app as given (relative) and again absolute: both go, and
    nothing else, not the current folder ("")."""
    import os

    from mlpsych.app import leave_sys_path

    page = tmp_path / "mlpsych" / "app" / "page.py"
    page.parent.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    path = [str(page.parent), "", os.path.join("mlpsych", "app"), str(tmp_path / "mlpsych"), str(page.parent)]
    leave_sys_path(path, str(page))
    assert path == ["", str(tmp_path / "mlpsych")]
    leave_sys_path(path, str(page))  # not there: nothing to do
    assert path == ["", str(tmp_path / "mlpsych")]
