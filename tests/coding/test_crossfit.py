"""The adapted reader's own calibrator: cross-fitted on the coded papers, saved in its folder, used by runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mlpsych.cache import ResultCache
from mlpsych.coding import confidence as cf
from mlpsych.coding.adapt import AdaptOptions, adapt, adapt_settings, summary_lines, use_adapted
from mlpsych.coding.coded import Coding, CodedSpan
from mlpsych.coding.crossfit import CALIBRATOR_FILE, coding_gold, cross_fitted_calibrator, folds_of, read_as_runs
from mlpsych.documents import Document
from mlpsych.pipeline import Pipeline
from mlpsych.questions import load_question_set
from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings

from .conftest import PAPER_A, PAPER_B, PAPER_C

RUN = RunSettings(reader=ReaderSettings(max_length=64, stride=16, question_tokens=24), llm=LLMSettings(enabled=False))
PAPER_D = ("Interviews were transcribed. We trained a naive Bayes classifier on the transcripts. Accuracy was "
           "estimated by cross-validation in scikit-learn. The question was whether teachers' talk predicts grades.")


@pytest.fixture(scope="module")
def questions():
    return load_question_set("mlpsych").select(["q1", "q2"])


@pytest.fixture
def docs() -> dict[str, Document]:
    return {d.id: d for d in (Document("A", PAPER_A), Document("B", PAPER_B), Document("C", PAPER_C),
                              Document("D", PAPER_D))}


def test_folds_and_the_coding_as_gold():
    assert folds_of(["A", "B", "C", "D", "E"], 2) == [["A", "C", "E"], ["B", "D"]]
    coding = Coding([CodedSpan("A", "q1", "random forests", 0, 5, True, "accepted"),
                     CodedSpan("A", "q1", "grid search", 9, 20, False, "wrong"),
                     CodedSpan("B", "q2", "gensim", 0, 6, True, "gold")],
                    {("A", "q1"), ("B", "q2"), ("C", "q1")})
    assert coding_gold(coding) == {"q1": {"A": ["random forests"], "C": []}, "q2": {"B": ["gensim"]}}


def coding_of_its_own_answers(rows: list[dict]) -> Coding:
    """Coding that accepts every other answer the reader gives (rank order), so readers that answer as it does
    have answers of both kinds, whatever their random weights find."""
    spans, pairs = [], set()
    for i, row in enumerate(sorted(rows, key=lambda r: (r["paper_id"], r["question_id"], -r["score"]))):
        pairs.add((row["paper_id"], row["question_id"]))
        if i % 2 == 0 and row.get("start") is not None:
            spans.append(CodedSpan(row["paper_id"], row["question_id"], row["answer"], row["start"], row["end"],
                                   True, "accepted"))
    return Coding(spans, pairs)


@pytest.mark.slow
def test_cross_fitted_calibrator_labels_the_fold_readers_answers_by_the_coding(tmp_path: Path, docs, questions,
                                                                                  tiny_bert: Path):
    rows = read_as_runs(tiny_bert, list(docs.values()), questions, RUN, tmp_path / "cache", progress=False)
    coding = coding_of_its_own_answers(rows)
    trained_on = []

    def base_reader(part: Coding, folder: Path, description: str) -> Path:  # the fold "reader": the base one
        trained_on.append(part.papers)
        return tiny_bert

    fitted = cross_fitted_calibrator(coding, docs, questions, 2, RUN, tmp_path / "cf", base_reader,
                                     progress=False)
    assert trained_on == [["B", "D"], ["A", "C"]]  # each fold read by a reader of the other papers
    calibrator = fitted.calibrator
    assert calibrator is not None, fitted.reason
    gold = coding_gold(coding)
    data = cf.labelled(rows, {p: d.text for p, d in docs.items()}, {"q1": "entity", "q2": "entity"},
                       lambda row, item: cf.gold_label(item, gold, unanswerable=()))
    assert calibrator.fitted_on["answers"] == len(data.y) and calibrator.fitted_on["correct"] == int(data.y.sum())
    assert 0 < data.y.sum() < len(data.y) and calibrator.fitted_on["papers"] == ["A", "B", "C", "D"]

    too_few = cross_fitted_calibrator(coding.only(["A"]), docs, questions, 2, RUN, tmp_path / "cf", base_reader)
    assert too_few.calibrator is None and "too few for 2 folds" in too_few.reason
    nothing_right = Coding([], coding.pairs)
    wrong = cross_fitted_calibrator(nothing_right, docs, questions, 2, RUN, tmp_path / "cf", base_reader,
                                    progress=False)
    assert wrong.calibrator is None and "correct and answers marked wrong" in wrong.reason


@pytest.mark.slow
def test_adapt_writes_the_calibrator_and_runs_use_it_for_its_questions(tmp_path: Path, docs, questions,
                                                                        tiny_bert: Path):
    rows = read_as_runs(tiny_bert, list(docs.values()), questions, RUN, tmp_path / "cache", progress=False)
    coding = coding_of_its_own_answers(rows)
    # a learning rate that leaves the weights as they were: the fold readers answer as the base reader does
    settings = adapt_settings(str(tiny_bert), max_length=64, stride=16, batch_size=8, lr=1e-12, epochs=1)
    out = tmp_path / "adapted"
    options = AdaptOptions(passage_words=12, min_answers=1, calibration_folds=2)  # the folds the asserts name
    done = adapt(coding, docs, questions, out, settings, options,
                 checkpoints=tmp_path / "ck", progress=False, run_settings=RUN)
    own = cf.Calibrator.load(out / CALIBRATOR_FILE)
    assert own.fitted_on["papers"] == ["A", "B", "C", "D"] and own.fitted_on["answers"] > 0
    assert own.fitted_on == done.calibration.calibrator.fitted_on
    folds = sorted((tmp_path / "ck" / "calibration").glob("fold*/*/reader"))
    assert [p.parents[1].name for p in folds] == ["fold0", "fold1"]
    stamps = [(p / "model.safetensors").stat().st_mtime_ns for p in folds]
    adapt(coding, docs, questions, out, settings, options,
          checkpoints=tmp_path / "ck", progress=False, run_settings=RUN)  # a rerun reuses the fold readers ...
    assert [(p / "model.safetensors").stat().st_mtime_ns for p in folds] == stamps
    fewer = coding.only(["A", "B", "C"])
    adapt(fewer, docs, questions, tmp_path / "other", settings, options,
          checkpoints=tmp_path / "ck", progress=False, run_settings=RUN)  # ... for the same coding only:
    # folds [A, C] and [B]: fold 0's reader now learns from B alone (new), fold 1's from A and C (as before)
    assert len(list((tmp_path / "ck" / "calibration").glob("fold0/*/reader"))) == 2
    assert len(list((tmp_path / "ck" / "calibration").glob("fold1/*/reader"))) == 1
    off = adapt(coding, docs, questions, tmp_path / "plain", settings,
                AdaptOptions(passage_words=12, min_answers=1, calibration_folds=0), checkpoints=tmp_path / "ck",
                progress=False, run_settings=RUN)
    assert not (tmp_path / "plain" / CALIBRATOR_FILE).exists()
    assert any("no calibrator for its answers: cross-fitting turned off" in line for line in summary_lines(off))
    assert any("its answers' calibrator" in line for line in summary_lines(done))

    run_settings = RUN
    library = load_question_set("mlpsych").select(["q1", "q3"])
    base = library.model_copy(update={"questions": [q.model_copy(update={"models": [str(tiny_bert)]})
                                                    for q in library.questions]})
    asked = use_adapted(base, [out])  # q1 read by the adapted reader, q3 by the base reader
    result = Pipeline(asked, run_settings, ResultCache(tmp_path / "run"), progress=False).run([docs["B"]])
    assert f"q1: {out / CALIBRATOR_FILE}" in result.info.calibrator and "q3" not in result.info.calibrator.split(";")[1]
    finals = [a for a in result.answers if a.final]
    x = cf.feature_matrix([cf.scored_from_answer(a) for a in finals], {"B": PAPER_B}, {"q1": "entity", "q3": "phrase"})
    default = cf.Calibrator.load()
    expected = [(own if a.question_id == "q1" else default).predict(x[i:i + 1])[0] for i, a in enumerate(finals)]
    assert {a.question_id for a in finals} == {"q1", "q3"}
    assert np.allclose([a.confidence for a in finals], expected, atol=1e-4)

    named = run_settings.model_copy(update={"answers": run_settings.answers.model_copy(
        update={"calibrator": str(out / CALIBRATOR_FILE)})})  # a calibrator the run names wins for every question
    again = Pipeline(asked, named, ResultCache(tmp_path / "run"), progress=False).run([docs["B"]])
    assert again.info.calibrator == str(out / CALIBRATOR_FILE)
