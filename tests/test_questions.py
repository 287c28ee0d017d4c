"""Question templates: the paper's file, user files, and errors that name file, question and field."""

from __future__ import annotations

import json

import pytest

from mlpsych.questions import QuestionFileError, load_question_set, load_question_sets


def write(tmp_path, text: str, name: str = "mine.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_paper_configuration():
    qs = load_question_set("mlpsych")
    q1, q2, q3, q4 = (qs.get(i) for i in ("q1", "q2", "q3", "q4"))
    assert q1.models == ["deepset/deberta-v3-large-squad2", "ahotrod/albert_xxlargev1_squad2_512"]
    assert (q1.top_k, q1.merge, q1.normalize is not None) == (30, True, True)  # the first 20 merged (answers.read)
    assert q2.models == ["ahotrod/electra_large_discriminator_squad2_512", "deepset/roberta-large-squad2"]
    # the first 20 of the top 30 merged for q2 and q3 as the paper's code (benchmarks/README.md, answer_quality)
    assert (q2.top_k, q2.merge, q2.allow_empty, q2.normalize is not None) == (30, True, False, True)
    assert (q3.kind, q3.top_k, q3.merge, q3.normalize) == ("phrase", 30, True, None)
    assert q4.max_sub_questions >= 1000  # every q1 answer is asked about
    assert q3.answer_tokens > q1.answer_tokens  # phrase answers need long spans
    assert (q4.bridge_from, q4.models) == ("q1", ["deepset/deberta-v3-large-squad2"])
    assert q4.sub_question("random forest") == "What was random forest used for?"
    assert [q.id for q in qs.in_run_order()] == ["q1", "q2", "q3", "q4"]


def test_user_questions_in_yaml_and_json(tmp_path):
    yaml_file = write(tmp_path, "questions:\n  - id: n\n    text: How many participants took part?\n    kind: number\n    models: [some/model]\n")
    json_file = write(tmp_path, json.dumps({"questions": [{"id": "c", "text": "In which country?", "models": ["x/y"]}]}), "c.json")
    both = load_question_sets([yaml_file, json_file])
    assert [q.id for q in both.questions] == ["n", "c"]
    assert both.get("n").top_k == 5


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("questions:\n  - id: q1\n    text: What?\n    models: [m]\n    top_k: many\n", "question 'q1': field 'top_k'"),
        ("questions:\n  - id: q1\n    text: What was used?\n", "question 'q1': field 'models'"),
        ("questions:\n  - id: q1\n    text: What was used?\n    models: [m]\n    colour: red\n", "question 'q1': field 'colour'"),
        ("questions:\n  - text: What was used?\n    models: [m]\n", "question #1: field 'id'"),
        ("questions:\n  - id: a\n    text: What was __PLACEHOLDER__ for?\n    models: [m]\n    bridge_from: zz\n", "unknown question 'zz'"),
        ("questions:\n  - id: a\n    text: What was __PLACEHOLDER__ for?\n    models: [m]\n    bridge_from: b\n"
         "  - id: b\n    text: What was __PLACEHOLDER__ about?\n    models: [m]\n    bridge_from: a\n", "bridge cycle"),
        ("questions:\n  - id: a\n    text: What was __PLACEHOLDER__ for?\n    models: [m]\n", "needs bridge_from"),
        ("questions:\n  - id: a\n    text: What was used?\n    models: [m]\n    retrieval: {also_ask: [x]}\n",
         "also_ask names sub-questions: it needs bridge_from"),
        ("questions:\n  - id: a\n    text: What was used?\n    models: [m]\n    retrieval: {unit: paragraph}\n",
         "question 'a': field 'retrieval.unit'"),
        ("questions:\n  - id: a\n    text: '    '\n    models: [m]\n", "question 'a': field 'text': the question has no "
                                                                       "words"),
        ("questions: [\n", "cannot be read as YAML"),
        ("- just a list\n", "expected a mapping"),
        ("questions:\n  - id: a\n    text: One?\n    models: [m]\n  - id: a\n    text: Two?\n    models: [m]\n", "appears twice"),
    ],
)
def test_errors_name_file_question_and_field(tmp_path, body, expected):
    path = write(tmp_path, body)
    with pytest.raises(QuestionFileError) as info:
        load_question_set(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert expected in message
    assert "\n" not in message and "Value error" not in message  # pydantic's words for the file's own checks


def test_an_add_on_file_may_bridge_from_a_question_of_another_file(tmp_path):
    """``--questions mlpsych,follow-ups.yaml`` with a follow-up bridging from the library's q1 was refused: each
    file's bridges were checked alone ("bridges from unknown question 'q1'")."""
    add_on = write(tmp_path, "questions:\n  - id: q5\n    text: Which data was __PLACEHOLDER__ trained on?\n"
                             "    models: [m]\n    bridge_from: q1\n")
    both = load_question_sets(["mlpsych", add_on])
    assert [q.id for q in both.select(["q5"]).in_run_order()] == ["q1", "q5"]
    with pytest.raises(QuestionFileError, match=f"{add_on}: .*bridges from unknown question 'q1'"):
        load_question_sets([add_on])
    other = write(tmp_path, "questions:\n  - id: n\n    text: How many took part?\n    models: [m]\n", "other.yaml")
    with pytest.raises(QuestionFileError, match="bridges from unknown question 'q1'"):
        load_question_sets([add_on, other])  # the merged set still checks its bridges


def test_a_numbered_id_is_said_to_be_a_number_with_how_to_write_it(tmp_path):
    """``id: 1`` (questions numbered 1, 2, 3) said only "Input should be a valid string"."""
    path = write(tmp_path, "questions:\n  - id: 1\n    text: How many took part?\n    models: [m]\n")
    with pytest.raises(QuestionFileError, match=r"field 'id': .*1 is read as a number: write the id as text, e\.g\. "
                                                r"q1 or '1' in quotes"):
        load_question_set(path)
    quoted = write(tmp_path, "questions:\n  - id: '1'\n    text: How many took part?\n    models: [m]\n", "q.yaml")
    assert load_question_set(quoted).questions[0].id == "1"


@pytest.mark.parametrize("question_id", ["status", "paper_id", "Source_File"])
def test_an_id_that_is_a_column_of_the_papers_sheet_is_refused(tmp_path, question_id):
    """A question called "status" (socioeconomic status, say) overwrote the papers sheet's status column: a paper
    that failed showed an empty status, and the other papers their answers where "ok" belonged."""
    path = write(tmp_path, f"questions:\n  - id: {question_id}\n    text: What status did they have?\n    models: [m]\n")
    with pytest.raises(QuestionFileError, match=rf"question '{question_id}': field 'id': .*names a column"):
        load_question_set(path)


def test_the_refused_ids_cover_the_papers_sheets_own_columns():
    from mlpsych.documents import Document
    from mlpsych.export import paper_rows
    from mlpsych.pipeline import RunResult
    from mlpsych.questions import RESERVED_IDS, parse_question_set

    questions = parse_question_set({"questions": [{"id": "q", "text": "What was used?", "models": ["m"]}]}, "f")
    result = RunResult(documents=[Document(id="p", text="Some text.")], questions=questions)
    assert set(paper_rows(result)[0]) - {"q"} <= set(RESERVED_IDS)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("questions:\n\t- id: a\n", "line 2, column 1: found character '\\t' that cannot start any token (indent with "
                                     "spaces"),
        ("questions:\n  - id: a\n    text: Design: was it an experiment?\n    models: [m]\n",
         "line 3, column 17: mapping values are not allowed here (put a text holding ': ' in quotes"),
    ],
)
def test_a_yaml_mistake_is_said_with_its_line(tmp_path, body, expected):
    """A tab or an unquoted ': ' in a question's text was reported by YAML's first line alone ("while scanning for
    the next token"), with no line to look at."""
    path = write(tmp_path, body)
    with pytest.raises(QuestionFileError) as info:
        load_question_set(path)
    assert str(info.value).startswith(f"{path}: cannot be read as YAML: {expected}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_file_saved_with_a_byte_order_mark_is_read(tmp_path, suffix):
    """A JSON question file saved by Notepad or Windows PowerShell (UTF-8 with a byte-order mark) was refused:
    "Unexpected UTF-8 BOM (decode using utf-8-sig)"."""
    path = tmp_path / f"mine{suffix}"
    body = json.dumps({"questions": [{"id": "n", "text": "How many took part?", "models": ["m"]}]})
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    assert [q.id for q in load_question_set(path).questions] == ["n"]


def test_a_file_not_saved_as_utf8_is_said_with_its_line(tmp_path):
    """A file saved in a Windows code page ("Qu\xe9 se us\xf3?") said "'utf-8' codec can't decode byte 0xe9 in
    position 33": no line, nothing to do about it."""
    path = tmp_path / "mine.yaml"
    path.write_bytes("questions:\n  - id: a\n    text: Qué se usó?\n    models: [m]\n".encode("cp1252"))
    with pytest.raises(QuestionFileError) as info:
        load_question_set(path)
    assert str(info.value) == f"{path}: cannot be read as YAML: line 3 is not UTF-8 text (byte 0xe9): save the file as UTF-8"


def test_model_folders_beside_the_file_are_found_from_any_working_folder(tmp_path, monkeypatch):
    """A study folder holding its question file and its adapted reader (``models: [./my-reader]``) ran only from
    inside that folder; from anywhere else the run stopped: "reader ./my-reader: no model folder there"."""
    study = tmp_path / "study"
    for folder in ("my-reader", "my-llm"):
        (study / folder).mkdir(parents=True)
        (study / folder / "config.json").write_text("{}")
    write(study, "questions:\n  - id: a\n    text: What was used?\n    models: [./my-reader, deepset/roberta-base-squad2]\n"
                 "    normalize: {prompt: 'List {answers}', model: my-llm}\n", "q.yaml")
    monkeypatch.chdir(tmp_path)
    question = load_question_set("study/q.yaml").get("a")
    assert question.models == [str(study.resolve() / "my-reader"), "deepset/roberta-base-squad2"]
    assert question.normalize.model == str(study.resolve() / "my-llm")
    monkeypatch.chdir(study)  # found from the working folder too: kept as written
    assert load_question_set("q.yaml").get("a").models == ["./my-reader", "deepset/roberta-base-squad2"]


def test_unknown_name_lists_the_library():
    with pytest.raises(QuestionFileError, match="mlpsych"):
        load_question_set("no-such-template-set")


def test_no_name_a_folder_or_a_home_path_as_question_file_say_what_to_give(tmp_path, monkeypatch):
    """``--questions ""`` (a script's unset variable) said ": field 'questions': List should have at least 1 item",
    a study folder "not found" though it is there, and a quoted "~/study/q.yaml" was not found either."""
    with pytest.raises(QuestionFileError, match=r"^no question file given \(give a path, or one of: .*mlpsych"):
        load_question_sets([])
    write(tmp_path, "questions:\n  - id: n\n    text: How many took part?\n    models: [m]\n", "q.yaml")
    with pytest.raises(QuestionFileError, match=r"is a folder: give the file itself \(it holds q\.yaml\)"):
        load_question_set(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_question_set("~/q.yaml").get("n").text == "How many took part?"


def test_select_adds_bridges():
    qs = load_question_set("mlpsych").select(["q4"])
    assert [q.id for q in qs.questions] == ["q1", "q4"]
    with pytest.raises(QuestionFileError, match="no question q9"):
        load_question_set("mlpsych").select(["q9"])


def test_each_kind_has_its_defaults_and_an_unknown_kind_names_the_known_ones():
    from mlpsych.questions import QUESTION_KINDS, QuestionTemplate, parse_question_set

    for kind, defaults in QUESTION_KINDS.items():
        question = QuestionTemplate(id="q", text="What was used?", kind=kind, models=["m"])
        assert question.answer_tokens == defaults.max_answer_tokens
    assert QUESTION_KINDS["phrase"].max_answer_tokens == 96 and QUESTION_KINDS["number"].max_answer_tokens == 15
    with pytest.raises(QuestionFileError, match="unknown kind 'date' .*entity, phrase, number"):
        parse_question_set({"questions": [{"id": "q", "text": "When?", "kind": "date", "models": ["m"]}]}, "f.yaml")


def test_a_question_file_read_while_it_is_written_again_is_read_whole(tmp_path, monkeypatch):
    """`mlpsych dev tiny-models DIR` rewrote DIR/questions.yaml in place: a run started on it meanwhile (or a second
    tiny-models checking what it wrote) read an emptied file, "expected a mapping with a 'questions' list"."""
    from pathlib import Path

    from mlpsych.questions import dump_question_set

    path = tmp_path / "questions.yaml"
    questions = load_question_set("mlpsych")
    dump_question_set(questions, path)
    write_text, read_meanwhile = Path.write_text, []

    def write_text_read_meanwhile(self: Path, data: str, *args, **kwargs) -> int:
        with self.open("w", encoding="utf-8"):  # the file being written is opened (emptied) ...
            read_meanwhile.append(load_question_set(path))  # ... and a run reads the question file
        return write_text(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text_read_meanwhile)
    dump_question_set(questions, path)
    monkeypatch.undo()
    assert [q.text for q in read_meanwhile[0].questions] == [q.text for q in questions.questions]
    assert [q.text for q in load_question_set(path).questions] == [q.text for q in questions.questions]
    assert [p.name for p in tmp_path.iterdir()] == ["questions.yaml"]
