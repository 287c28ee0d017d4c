"""A run from the page: the model check before any paper is read, the pipeline's typed events, empty runs."""

from __future__ import annotations

import time

import pytest

from mlpsych import preflight
from mlpsych.app import runner
from mlpsych.progress import ProgressEvent
from mlpsych.questions import load_question_set, parse_question_set
from mlpsych.settings import LLMSettings, RunSettings

MISSING_HUB_ID = "mlpsych-test/no-such-reader-squad2"


def test_model_check_without_network(tmp_path, tiny_models):
    here = preflight.check_model(str(tiny_models["deberta-v2"]))
    assert here.where == "folder"
    assert preflight.check_model(str(tmp_path / "nothing")).where == "missing"
    started = time.monotonic()
    missing = preflight.check_model("deepset/deberta-v3-large-squad2", "reader")  # tests run offline
    assert time.monotonic() - started < 5
    assert missing.where in ("missing", "cache") and missing.size == "about 1.7 GB"
    message = preflight.missing_message([here, preflight.ModelCheck(MISSING_HUB_ID, "missing"),
                                         preflight.ModelCheck("deepset/roberta-base-squad2", "missing", 0.5, "LLM")])
    assert message.splitlines() == [
        "The run did not start: these models are needed and not available.",
        f"- reader {MISSING_HUB_ID} (size unknown to download): not on this machine, and the Hugging Face Hub "
        "cannot be reached to download it",
        "- LLM deepset/roberta-base-squad2 (about 0.5 GB to download): not on this machine, and the Hugging Face "
        "Hub cannot be reached to download it"]
    assert preflight.missing_message([here]) is None


def test_download_note_sums_known_sizes():
    checks = [preflight.ModelCheck("deepset/deberta-v3-base-squad2", "download", 0.7),
              preflight.ModelCheck("meta-llama/Meta-Llama-3-8B-Instruct", "download", 16.0, "LLM"),
              preflight.ModelCheck("/here", "folder")]
    assert preflight.download_note(checks).startswith("The first run downloads 2 model(s), about 16.7 GB in all:")
    assert preflight.download_note(checks[2:]) is None


def test_models_here_lists_folders_first(tiny_models, tmp_path):
    folder = str(tiny_models["electra"])
    assert preflight.models_here([str(tmp_path / "gone"), folder])[0] == folder
    assert str(tmp_path / "gone") not in preflight.models_here([str(tmp_path / "gone")])


def test_missing_model_stops_the_run_before_any_paper_is_read(tmp_path, tiny_models):
    paper = tmp_path / "p.txt"
    paper.write_text("Participants (N = 20) were surveyed. We used random forests.", encoding="utf-8")
    questions = parse_question_set({"questions": [
        {"id": "q1", "text": "Which methods?", "models": [str(tiny_models["bert"]), MISSING_HUB_ID]}]}, "inline")
    started = [], []
    t0 = time.monotonic()
    outcome = runner.run_papers([paper], questions, RunSettings(llm=LLMSettings(enabled=False)),
                                cache_dir=tmp_path / "c", on_start=lambda *a: started[0].append(a),
                                on_progress=started[1].append)
    assert time.monotonic() - t0 < 5
    assert outcome.result is None and outcome.documents == [] and started == ([], [])  # nothing was read
    assert outcome.missing_models and MISSING_HUB_ID in outcome.error
    assert [c.where for c in outcome.checks] == ["folder", "missing"]


def test_the_llm_is_checked_too_without_knowing_its_default(tmp_path, tiny_models):
    questions = parse_question_set({"questions": [
        {"id": "q1", "text": "Which methods?", "models": [str(tiny_models["bert"])],
         "normalize": {"prompt": "{answers}"}}]}, "inline")
    checks = preflight.check_run(questions, RunSettings(), tmp_path / "c")
    assert [(c.role, c.model == str(tiny_models["bert"])) for c in checks] == [("reader", True), ("LLM", False)]
    assert checks[1].where in ("missing", "cache")  # the pipeline's default LLM, offline
    assert [c.role for c in preflight.check_run(questions, RunSettings(llm=LLMSettings(enabled=False)))] == ["reader"]


def test_nothing_readable_is_its_own_outcome(tmp_path, tiny_questions):
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"not a pdf")
    questions = load_question_set(tiny_questions).select(["q1"])
    outcome = runner.run_papers([bad], questions, RunSettings(llm=LLMSettings(enabled=False)),
                                cache_dir=tmp_path / "c")
    assert outcome.error is None and outcome.nothing_read
    assert outcome.result.answers == [] and list(outcome.result.errors) == ["broken"]


def test_a_users_mistake_is_a_message_and_a_bug_says_it_is_one(tmp_path, tiny_questions, monkeypatch):
    """The page shows the project's user errors as they are; anything else (here a ValueError from inside the
    reading) is reported as a bug with where to report it, not dressed up as the user's mistake."""
    from mlpsych import ingest

    questions = load_question_set(tiny_questions).select(["q1"])
    settings = RunSettings(llm=LLMSettings(enabled=False))
    mistake = runner.run_papers(tmp_path / "no-such-folder", questions, settings, cache_dir=tmp_path / "c")
    assert mistake.error == f"no such file or folder: {tmp_path / 'no-such-folder'}"

    def broken(*args, **kwargs):
        raise ValueError("bad offsets")

    monkeypatch.setattr(ingest, "load_documents", broken)
    bug = runner.run_papers(tmp_path, questions, settings, cache_dir=tmp_path / "c")
    assert bug.error.startswith("the run stopped: ValueError: bad offsets. this is a bug in mlpsych")
    assert "report it" in bug.error


@pytest.mark.slow
def test_the_pipeline_reports_typed_events_matching_its_plan(tmp_path, tiny_questions, examples_dir):
    papers = sorted((examples_dir / "papers").glob("*.txt"))[:2]
    questions = load_question_set(tiny_questions).select(["q1", "q4"])
    events: list[ProgressEvent] = []
    plans = []
    outcome = runner.run_papers(papers, questions, RunSettings(llm=LLMSettings(enabled=True, max_new_tokens=8)),
                                cache_dir=tmp_path / "c", on_progress=events.append,
                                on_start=lambda docs, plan: plans.append(plan))
    assert outcome.error is None, outcome.error
    (plan,) = plans
    assert [e.key for e in plan] == list(dict.fromkeys(e.key for e in events))  # every stage planned, in order
    assert {e.stage for e in events} == {"read", "normalize"}
    reads = [e for e in events if e.stage == "read" and not e.loading and not e.sizing]
    assert all(e.unit == "paper" and 0 <= e.done <= e.total <= 2 for e in reads if e.questions == ("q1",))
    loaded = [events[i + 1] for i, e in enumerate(events) if e.loading]  # each load is followed by 'loaded'
    assert all(not e.loading and e.done == 0 for e in loaded if e.stage == "read")
    assert [(e.questions, e.counted) for e in plan if e.stage == "read"][-1] == (("q4",), False)  # counted later
    (size,) = [e for e in events if e.sizing]
    follow_ups = [e for e in reads if e.questions == ("q4",)]
    assert size.questions == ("q4",) and size.unit == "sub-question" and size.total > 2
    assert events.index(size) < events.index(follow_ups[0]) and follow_ups[-1].done == size.total
    assert all(e.unit == "sub-question" and e.total == size.total for e in follow_ups)
    assert any(e.loading for e in events)  # a model load is announced before the wait
    llm = [e for e in events if e.stage == "normalize"]
    assert llm[0].done == 0 and llm[-1].done == llm[-1].total and all(e.unit == "batch" for e in llm)
    for key in {e.key for e in events}:  # within a stage, units only go up
        done = [e.done for e in events if e.key == key]
        assert done == sorted(done)


def test_the_local_engine_passes_the_events_on(tmp_path, tiny_questions, examples_dir):
    from mlpsych.engines.local import LocalEngine
    from mlpsych.ingest import load_documents

    events: list[ProgressEvent] = []
    documents = load_documents(sorted((examples_dir / "papers").glob("*.txt"))[:1], progress=False)
    LocalEngine(on_progress=events.append).run(load_question_set(tiny_questions).select(["q1"]),
                                               RunSettings(llm=LLMSettings(enabled=False)), documents,
                                               tmp_path / "c", progress=False)
    assert events and all(isinstance(e, ProgressEvent) and e.questions == ("q1",) for e in events)
    assert events[-1].done == events[-1].total == 1
