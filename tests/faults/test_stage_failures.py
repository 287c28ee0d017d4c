"""One paper of three fails at each stage in turn: its status names the stage and the exception, the other two
papers are answered, and the output is complete (every paper has a row, every sheet opens)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from openpyxl import load_workbook

from mlpsych.cli import main

POISON = "poison"
PAPERS = {
    "alpha": "Nurses (N = 312) wrote essays. We trained random forests in R to predict burnout. " * 8,
    "beta": "Students (N = 90) kept diaries. We used support vector machines in Python to classify mood. " * 8,
    POISON: "Teachers (N = 41) were interviewed. We applied lasso regression in SPSS to predict stress. " * 8,
}


class Injected(RuntimeError):
    """The failure a test plants in one stage for the poisoned paper."""


@pytest.fixture(scope="module")
def papers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("three-papers")
    for name, text in PAPERS.items():
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def questions(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ensemble question normalized by the tiny Llama, and a bridged question asked per technique."""
    path = tmp_path_factory.mktemp("stage-questions") / "questions.yaml"
    path.write_text(
        "questions:\n"
        "  - id: q1\n    text: What machine learning techniques were used?\n"
        f"    models: ['{tiny_models['electra']}', '{tiny_models['roberta']}']\n    top_k: 4\n"
        f"    normalize:\n      model: '{tiny_models['llama']}'\n      prompt: 'Techniques as a list: {{answers}}'\n"
        "  - id: q4\n    text: What was __PLACEHOLDER__ used for?\n    kind: phrase\n"
        f"    models: ['{tiny_models['bert']}']\n    bridge_from: q1\n    top_k: 2\n",
        encoding="utf-8",
    )
    return path


def poisoned(doc_id: str) -> None:
    if doc_id == POISON:
        raise Injected(f"planted failure for {doc_id}")


def _plant(monkeypatch: pytest.MonkeyPatch, stage: str) -> None:
    """Make ``stage`` raise for the poisoned paper only, at the real function that does that stage's work."""
    import mlpsych.export as export
    import mlpsych.ingest as ingest
    import mlpsych.multihop as multihop
    import mlpsych.normalize.answers as normalize
    import mlpsych.pipeline.read as read_stage
    import mlpsych.reading.released as released
    from mlpsych.documents import Document
    from mlpsych.normalize.cache import CachedNormalizer
    from mlpsych.reading.reader import Reader

    def wrap(owner, name, doc_of):
        original = getattr(owner, name)

        def planted(*args, **kwargs):
            poisoned(doc_of(*args, **kwargs))
            return original(*args, **kwargs)

        static = isinstance(inspect.getattr_static(owner, name), staticmethod)
        monkeypatch.setattr(owner, name, staticmethod(planted) if static else planted)

    if stage == "ingest":
        wrap(ingest, "read_text_file", lambda path: Path(path).stem)
    elif stage == "hashing":
        digest = Document.sha256

        def sha256(self):
            poisoned(self.id)
            return digest.fget(self)

        monkeypatch.setattr(Document, "sha256", property(sha256))
    elif stage == "windowing":
        wrap(read_stage, "windows_to_read", lambda reader, doc, query: doc.id)
    elif stage == "reading":
        wrap(Reader, "run", lambda self, doc, queries: doc.id)
        wrap(Reader, "run_many", lambda self, papers: POISON if any(d.id == POISON for d, _ in papers) else "")
    elif stage == "merging":
        wrap(released, "released_answers", lambda doc, spans, merge=True, read=None: doc.id)
    elif stage == "generating":  # the LLM fails on a prompt made from the poisoned paper's answers
        wrap(CachedNormalizer, "run",
             lambda self, prompts, **_: POISON if any("lasso" in p.lower() or "spss" in p.lower() for p in prompts)
             else "")
    elif stage == "normalizing":
        wrap(normalize, "combine_results", lambda doc, *args, **kwargs: doc.id)
    elif stage == "multi-hop":
        wrap(multihop, "ranked_entities", lambda answers, *_: answers[0].doc_id if answers else "")
    elif stage == "export":
        wrap(export, "_answer_row", lambda answer, question, source: answer.doc_id)
    else:  # pragma: no cover - a misspelt stage must not pass silently
        raise AssertionError(stage)


STAGES = ["ingest", "hashing", "windowing", "reading", "merging", "generating", "normalizing", "multi-hop", "export"]


@pytest.mark.slow
@pytest.mark.parametrize("stage", STAGES)
def test_a_failing_paper_never_ends_the_run(stage, papers, questions, tmp_path, monkeypatch, capsys):
    _plant(monkeypatch, stage)
    out = tmp_path / "out.xlsx"
    code = main(["run", str(papers), "--questions", str(questions), "--out", str(out), "--cache",
                 str(tmp_path / "cache"), "--no-progress", "--max-length", "128", "--stride", "32",
                 "--max-sub-questions", "2"])
    assert code == 0
    assert "Traceback" not in capsys.readouterr().err

    book = load_workbook(out)
    sheet = book["papers"]
    header = [c.value for c in sheet[1]]
    papers_sheet = {row[0]: dict(zip(header, row)) for row in sheet.iter_rows(min_row=2, values_only=True)}
    assert set(papers_sheet) == set(PAPERS)  # the output is complete: every paper has its row
    status = papers_sheet[POISON]["status"]
    assert "Injected: planted failure for poison" in status and "Traceback" not in status
    for name in ("alpha", "beta"):  # the others are answered as if nothing had happened
        assert papers_sheet[name]["status"] == "ok"
        assert papers_sheet[name]["q1"]
    answers = [dict(zip([c.value for c in book["answers"][1]], row))
               for row in book["answers"].iter_rows(min_row=2, values_only=True)]
    answered = {a["paper_id"] for a in answers if a["question_id"] == "q1"}
    assert {"alpha", "beta"} <= answered
    if stage in ("ingest", "hashing", "export"):  # nothing of that paper can be kept
        assert POISON not in {a["paper_id"] for a in answers}
    if stage in ("generating", "normalizing"):  # the paper keeps its extractive answers
        assert any(a["paper_id"] == POISON and a["stage"] == "extractive" for a in answers)
    if stage == "multi-hop":  # q1 answered, the follow-up failed for that paper only
        assert POISON in answered and POISON not in {a["paper_id"] for a in answers if a["question_id"] == "q4"}


@pytest.mark.slow
def test_ingest_writes_every_other_paper_when_one_cannot_be_written(papers, tmp_path, monkeypatch):
    """`mlpsych ingest`: a document that cannot be serialized is written as a failed document, not a crash."""
    from mlpsych.documents import Document

    to_dict = Document.to_dict

    def planted(self):
        poisoned(self.id)
        return to_dict(self)

    monkeypatch.setattr(Document, "to_dict", planted)
    out = tmp_path / "texts.jsonl"
    assert main(["ingest", str(papers), "--out", str(out), "--quiet"]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    by_id = {d["id"]: d for d in lines}
    assert set(by_id) == set(PAPERS)
    assert by_id[POISON]["status"].startswith("export: Injected") and by_id[POISON]["text"] == ""
    assert by_id["alpha"]["status"] == "ok" and by_id["alpha"]["text"]
