"""Calibrated confidence: features, the logistic fit and its JSON, labels, figures, and the pipeline's column."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mlpsych.answers import Answer
from mlpsych.coding import confidence as cf
from mlpsych.documents import Document
from mlpsych.pipeline.confidence import ConfidenceStage
from mlpsych.pipeline.context import ModelPool, RunCounters, StageContext
from mlpsych.pipeline.records import Level
from mlpsych.provenance import version
from mlpsych.pipeline.result import RunResult
from mlpsych.questions import QuestionSet, QuestionTemplate
from mlpsych.settings import RunSettings


def test_features_rank_within_each_list_and_share_of_readers():
    items = [cf.Scored("A", "q1", "random forests", 0.2, 2, True),
             cf.Scored("A", "q1", "SVM", 0.9, 1, True),
             cf.Scored("A", "q3", "to predict dropout", 0.5, 1, False),
             cf.Scored("B", "q1", "lasso", 0.1, 1, True)]
    texts = {"A": "random forests, Random  forests and SVM.", "B": "lasso"}
    x = cf.feature_matrix(items, texts, {"q3": "phrase"})
    col = {name: x[:, i] for i, name in enumerate(cf.FEATURES)}
    assert list(np.exp(col["log_rank"])) == pytest.approx([2, 1, 1, 1])
    assert list(np.exp(col["log_answers"])) == pytest.approx([2, 2, 1, 1])
    assert list(col["agreement"]) == [1.0, 0.5, 1.0, 0.5]  # q1's most readers on one answer: 2
    assert list(np.expm1(col["log_recurrence"])) == pytest.approx([2, 1, 0, 1])
    assert list(col["grounded"]) == [1, 1, 0, 1] and list(col["phrase"]) == [0, 0, 1, 0]


def test_recurrence_sets_case_and_any_white_space_aside():
    paper = cf.fold("We fit a Random\u00a0Forest, then random\n  forests; RANDOM FOREST.")
    assert cf.recurrence("random forest", paper) == 3
    assert cf.recurrence("Random  Forests", paper) == 1
    assert cf.recurrence("forest random", paper) == 0
    assert cf.recurrence("   ", paper) == 0


def _run_confidences(docs: list[Document], answers: list[Answer], calibrator: str) -> dict[tuple[str, str], float]:
    """The confidence stage over one level of ``docs`` (q1 read by two readers): (paper, answer) -> confidence."""
    q1 = QuestionTemplate(id="q1", text="What techniques were used?", models=["m1", "m2"])
    questions = QuestionSet(questions=[q1])
    result = RunResult(docs, questions, answers=[Answer.from_dict(a.to_dict()) for a in answers])
    settings = RunSettings(answers={"calibrator": calibrator})
    ConfidenceStage(settings, questions).run(Level([q1], docs),
                                             StageContext(settings, None, result, RunCounters(), ModelPool(), []))
    return {(a.doc_id, a.text): a.confidence for a in result.answers}


def test_a_papers_confidence_does_not_depend_on_the_other_papers_of_the_run(tmp_path):
    """Agreement was a share of the most readers any answer of the question had in the whole run: paper B's
    answers, each from one of q1's two readers, got agreement 1 read alone and 0.5 read beside paper A, where both
    readers gave one answer; with a study's calibrator that weighs agreement (the shipped one, fitted on one
    reader, does not), their confidence, and so the order of the answers sheet, changed with the folder."""
    weights = [1.0 if name == "agreement" else 0.0 for name in cf.FEATURES]
    calibrator = tmp_path / "calib.json"
    cf.Calibrator(weights, 0.0, [0.0] * len(weights), [1.0] * len(weights), {}, list(cf.FEATURES)).save(calibrator)
    a = Document(id="A", text="We used SVM and random forests.")
    b = Document(id="B", text="We fitted a lasso regression and ridge.")
    answers = [Answer("A", "q1", "SVM", "extractive", ["m1", "m2"], 0.6, 8, 11, ensemble=True, final=True),
               Answer("A", "q1", "random forests", "extractive", ["m1"], 0.3, 16, 30, ensemble=True, final=True),
               Answer("B", "q1", "lasso regression", "extractive", ["m1"], 0.4, 12, 28, ensemble=True, final=True),
               Answer("B", "q1", "ridge", "extractive", ["m2"], 0.2, 33, 38, ensemble=True, final=True)]
    together = _run_confidences([a, b], answers, str(calibrator))
    alone = _run_confidences([b], answers[2:], str(calibrator))
    assert alone == {k: v for k, v in together.items() if k[0] == "B"}
    x = cf.feature_matrix([cf.scored_from_answer(x) for x in answers[2:]], {"B": b.text}, {}, {"q1": 2})
    assert list(x[:, cf.FEATURES.index("agreement")]) == [0.5, 0.5]  # one of q1's two readers, alone or not


def test_fit_learns_the_direction_and_round_trips_as_json(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, len(cf.FEATURES)))
    y = rng.random(400) < 1 / (1 + np.exp(-(2 * x[:, 0] - 1)))
    calibrator = cf.fit(x, y, {"description": "synthetic"})
    assert calibrator.weights[0] > 1.0 and all(abs(w) < 0.5 for w in calibrator.weights[1:])
    assert calibrator.fitted_on == {"description": "synthetic", "answers": 400, "correct": int(y.sum()),
                                    "l2": cf.L2_UNGROUPED, "mlpsych": version()}
    path = tmp_path / "c.json"
    calibrator.save(path)
    assert json.loads(path.read_text())["features"] == list(cf.FEATURES)  # JSON, nothing pickled
    again = cf.Calibrator.load(path)
    assert np.allclose(again.predict(x), calibrator.predict(x))
    p = calibrator.predict(x)
    assert abs(p.mean() - y.mean()) < 0.01  # a logistic fit with an intercept matches the base rate
    with pytest.raises(cf.CalibratorError, match="correct and answers marked wrong"):
        cf.fit(x[:3], [True, True, True], {})


def _papers(n_answers: int, per_paper: int) -> list[str]:
    return [f"P{i // per_paper}" for i in range(n_answers)]


def test_the_penalty_chosen_over_papers_shrinks_noise_to_the_base_rate():
    # a study's coding: 12 papers, ~8% correct, features that say nothing: free weights would fit the noise
    rng = np.random.default_rng(1)
    x = rng.normal(size=(180, len(cf.FEATURES)))
    y = rng.random(180) < 0.08
    y[:2] = True
    papers = _papers(180, 15)
    chosen = cf.fit(x, y, {}, groups=papers)
    free = cf.fit(x, y, {}, l2=cf.L2_GRID[0])
    assert chosen.fitted_on["l2"] >= 100
    assert np.ptp(chosen.predict(x)) < 0.5 * np.ptp(free.predict(x))
    assert abs(chosen.predict(x).mean() - y.mean()) < 0.01


def test_the_penalty_chosen_over_papers_keeps_a_real_signal():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(600, len(cf.FEATURES)))
    y = rng.random(600) < 1 / (1 + np.exp(-(3 * x[:, 0] - 2)))
    chosen = cf.fit(x, y, {}, groups=_papers(600, 30))
    assert chosen.fitted_on["l2"] <= 10 and chosen.weights[0] > 1.5


def test_the_penalty_without_papers_to_hold_out():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, len(cf.FEATURES)))
    y = np.arange(40) % 4 == 0
    assert cf.choose_l2(x, y, ["A"] * 40) == cf.L2_UNGROUPED  # one paper: nothing to hold out
    assert cf.fit(x, y, {}).fitted_on["l2"] == cf.L2_UNGROUPED  # papers not given
    # a paper holding every correct answer: held out, its fold's training part has one class and is skipped
    assert cf.choose_l2(x, y, ["A" if v else "B" for v in y], folds=2) == cf.L2_UNGROUPED


def test_bad_calibrator_files_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(cf.CalibratorError, match="not a calibrator file"):
        cf.Calibrator.load(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"features": ["score", "follow_up"], "weights": [1, 1], "intercept": 0,
                                 "mean": [0, 0], "scale": [1, 1]}))  # a feature this version does not know
    with pytest.raises(cf.CalibratorError, match="fitted on features"):
        cf.Calibrator.load(other)
    other.write_text(json.dumps({"features": ["score"], "weights": [1, 2], "intercept": 0, "mean": [0], "scale": [1]}))
    with pytest.raises(cf.CalibratorError, match="fitted on features"):
        cf.Calibrator.load(other)
    with pytest.raises(cf.CalibratorError, match="missing.json"):
        cf.Calibrator.load(tmp_path / "missing.json")


@pytest.mark.parametrize("change", [{"mean": "x"}, {"weights": math.nan}, {"scale": 0.0}, {"scale": [1, 2]},
                                    {"intercept": math.inf}], ids=["text", "nan", "zero-scale", "list", "inf"])
def test_a_calibrator_whose_numbers_are_not_numbers_is_refused_when_loaded(tmp_path, change):
    """A calibrator.json in a shared reader folder with text for a mean was loaded, then every run with that reader
    stopped after reading all its papers with "UFuncTypeError ... this is a bug"; NaN, infinite weights or a zero
    scale gave every answer a NaN confidence."""
    data = json.loads(cf.Calibrator.load().to_json())
    (key, value), = change.items()
    data[key] = value if key == "intercept" else [value] * len(data[key])
    path = tmp_path / "calibrator.json"
    path.write_text(json.dumps(data))  # NaN and Infinity as Python's json writes them
    with pytest.raises(cf.CalibratorError, match="calibrator.json: not a calibrator file"):
        cf.Calibrator.load(path)


def test_a_calibrator_fitted_on_fewer_features_predicts_from_those(tmp_path):
    """A file fitted before a feature was added (the 8 features of mlpsych before log_score) keeps loading and
    predicting as it did: it reads its own columns of the feature matrix."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, len(cf.FEATURES)))
    older = [f for f in cf.FEATURES if f != "log_score"]
    columns = [cf.FEATURES.index(f) for f in older]
    y = x[:, 0] + rng.normal(size=40) > 0
    fitted = cf.fit(x[:, columns], y, {})
    path = tmp_path / "older.json"
    path.write_text(json.dumps({**json.loads(fitted.to_json()), "features": older}))
    loaded = cf.Calibrator.load(path)
    assert loaded.features == tuple(older)
    z = (x[:, columns] - np.array(fitted.mean)) / np.array(fitted.scale)
    expected = 1 / (1 + np.exp(-(z @ np.array(fitted.weights) + fitted.intercept)))
    assert np.allclose(loaded.predict(x), expected)


def test_report_by_hand():
    r = cf.report([0.1, 0.2, 0.8, 0.9], [False, True, True, True], review_share=0.25)
    # bins: 0.1 (acc 0), 0.2 (acc 1), 0.8 (1), 0.9 (1): |0.1-0| + |0.2-1| + |0.8-1| + |0.9-1| over 4
    assert r.ece == pytest.approx((0.1 + 0.8 + 0.2 + 0.1) / 4)
    assert r.brier == pytest.approx((0.01 + 0.64 + 0.04 + 0.01) / 4)
    assert r.wrong_found == 1.0 and r.answers == 4 and r.correct == 3
    assert math.isnan(cf.report([0.5], [True]).wrong_found)


def test_review_finds_at_most_the_reviewed_share_of_the_wrong_answers():
    # 9 of 10 wrong: the least-sure 3 (30%) hold at most 3 of the 9, whatever the confidence
    labels = [True] + [False] * 9
    perfect = cf.report([0.9] + [0.1] * 9, labels)
    assert perfect.wrong_found == pytest.approx(3 / 9) == perfect.wrong_found_best
    inverted = cf.report([0.0] + [0.5] * 9, labels)
    assert inverted.wrong_found == pytest.approx(2 / 9) and inverted.wrong_found_best == pytest.approx(3 / 9)
    assert cf.report([0.2, 0.9], [False, True], review_share=0.5).wrong_found_best == 1.0


def test_labels_from_gold_and_from_coders():
    gold = {"q1": {"A": ["random forests (RF)"], "B": ["lasso"]}, "q2": {"A": ["caret"]}, "q3": {"A": ["x"]}}
    label = lambda q, paper, text: cf.gold_label(cf.Scored(paper, q, text, 0, 1, True), gold)  # noqa: E731
    assert label("q1", "A", "random forests") is True  # F1 0.8
    assert label("q1", "A", "forests of the study area and more") is False
    assert label("q2", "B", "gensim") is False  # B is a development paper without software
    assert label("q3", "B", "anything") is None  # B was not annotated for q3
    assert label("q4:forests", "A", "x") is None
    assert cf.sheet_label({"correct": "yes"}) is True
    assert cf.sheet_label({"correct": "no"}) is False
    assert cf.sheet_label({"correct": "yes", "corrected_answer": "better"}) is True  # the mark written wins
    assert cf.sheet_label({"correct": None, "corrected_answer": "better"}) is False
    assert cf.sheet_label({"correct": None}) is None
    assert cf.sheet_label({"correct": "yes", "stage": "coder"}) is None


def test_the_shipped_default_gives_final_answers_a_probability():
    calibrator = cf.Calibrator.load()
    assert "development papers" in calibrator.fitted_on["description"] and calibrator.fitted_on["answers"] > 100
    answers = [Answer("A", "q1", "random forests", "extractive", ["m"], 0.9, 0, 14, final=True),
               Answer("A", "q1", "trees", "extractive", ["m"], 0.1, 20, 25, final=True),
               Answer("A", "q1", "x", "extractive", ["m"], 0.1, 0, 1)]
    cf.add_confidence(answers, {"A": "random forests and trees"}, {}, calibrator)
    assert all(0 < a.confidence < 1 for a in answers[:2]) and answers[2].confidence is None
    assert answers[0].confidence != answers[1].confidence


class Counting(cf.Calibrator):
    """A calibrator that counts the answers it predicts."""

    predicted = 0

    def predict(self, x: np.ndarray) -> np.ndarray:
        self.predicted += x.shape[0]
        return super().predict(x)


def test_each_answer_is_predicted_by_its_questions_calibrator_only():
    default = cf.Calibrator.load()
    run = Counting(default.weights, default.intercept, default.mean, default.scale, default.fitted_on,
                   default.features)
    own = Counting([-w for w in default.weights], default.intercept + 1.0, default.mean, default.scale, {},
                   default.features)
    text = "random forests and trees; we asked whether grades predict dropout"
    answers = [Answer("A", "q1", "random forests", "extractive", ["m"], 0.9, 0, 14, final=True),
               Answer("A", "q3", "whether grades predict dropout", "extractive", ["m"], 0.4, 33, 63, final=True),
               Answer("A", "q1", "trees", "extractive", ["m"], 0.1, 19, 24, final=True),
               Answer("A", "q3", "dropout", "extractive", ["m"], 0.2, 56, 63, final=True),
               Answer("A", "q1", "x", "extractive", ["m"], 0.1, 0, 1)]
    kinds = {"q3": "phrase"}
    cf.add_confidence(answers, {"A": text}, kinds, run, {"q1": own})  # q1 has its own calibrator, q3 not
    finals = answers[:4]
    x = cf.feature_matrix([cf.scored_from_answer(a) for a in finals], {"A": text}, kinds)
    expected = [cf.Calibrator.predict(own if a.question_id == "q1" else run, x[i:i + 1])[0]
                for i, a in enumerate(finals)]
    assert [a.confidence for a in finals] == pytest.approx(expected, abs=1e-4) and answers[4].confidence is None
    assert abs(finals[0].confidence - default.predict(x[:1])[0]) > 0.01  # q1's own calibrator made a difference
    assert (run.predicted, own.predicted) == (2, 2)  # each answer once, by one calibrator


@pytest.mark.slow
def test_run_sheet_has_the_confidence_column_sorted(tiny_questions, tmp_path):
    from mlpsych.cache import ResultCache
    from mlpsych.documents import Document
    from mlpsych.evaluation.evaluate import read_sheet
    from mlpsych.export import write_result
    from mlpsych.pipeline import Pipeline
    from mlpsych.questions import load_question_set
    from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings

    text = "We used random forests and support vector machines in R with caret to predict burnout. " * 6
    settings = RunSettings(reader=ReaderSettings(max_length=128, stride=32, batch_size=8, question_tokens=32),
                           llm=LLMSettings(enabled=False), max_sub_questions=2)
    qs = load_question_set(tiny_questions).select(["q1", "q3"])
    result = Pipeline(qs, settings, ResultCache(tmp_path / "cache"), progress=False).run([Document("a", text)])
    assert result.info.calibrator.startswith("default: 34 development papers")
    write_result(result, tmp_path / "out.xlsx")
    rows = read_sheet(tmp_path / "out.xlsx", "answers")
    assert rows and all(0 < r["confidence"] < 1 for r in rows)
    for question in ("q1", "q3"):
        values = [r["confidence"] for r in rows if r["question_id"] == question]
        assert values == sorted(values, reverse=True)


def test_calibrate_command_on_a_coded_sheet(tmp_path, coded_sheet, capsys):
    from mlpsych.cli import main

    from .conftest import PAPER_A, PAPER_B

    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in (("A", PAPER_A), ("B", PAPER_B))))
    out = tmp_path / "study.json"
    assert main(["calibrate", "--texts", str(texts), "--out", str(out), "--coded", str(coded_sheet)]) == 0
    calibrator = cf.Calibrator.load(out)
    assert calibrator.fitted_on["answers"] == 5 and calibrator.fitted_on["correct"] == 2  # the added row is not
    assert "5 answers (2 correct)" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main(["run", str(texts), "--calibrator", str(bad), "--out", str(tmp_path / "r.xlsx")]) == 2
    assert "--calibrator: calibrator" in capsys.readouterr().err


def test_calibrate_refuses_a_sheet_of_another_corpus(tmp_path, coded_sheet, capsys):
    """With the wrong --texts, `mlpsych calibrate` fitted and wrote a calibrator anyway, on answers it then took to
    be absent from their papers; `mlpsych adapt` refused the same sheet. Now both refuse, naming the papers."""
    from mlpsych.cli import main

    texts = tmp_path / "other.jsonl"
    texts.write_text(json.dumps({"id": "Z", "text": "Another corpus: random forests in R."}) + "\n")
    out = tmp_path / "study.json"
    assert main(["calibrate", "--texts", str(texts), "--out", str(out), "--coded", str(coded_sheet)]) == 2
    err = capsys.readouterr().err
    assert "2 paper(s) are not in the texts given: A, B" in err and "Traceback" not in err
    assert not out.exists()


def test_calibrate_fits_the_same_calibrator_on_the_coded_sheet_saved_as_csv(tmp_path, coded_sheet, capsys):
    """A coder's sheet saved as CSV was refused (first with openpyxl's "cannot open as a workbook", then with a
    request to paste its rows into the workbook): the CSV is read as the workbook's answers sheet."""
    from mlpsych.cli import main

    from .conftest import PAPER_A, PAPER_B, saved_as_csv

    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in (("A", PAPER_A), ("B", PAPER_B))))
    fitted = {}
    for sheet in (coded_sheet, saved_as_csv(coded_sheet, tmp_path / "coded.csv")):
        out = tmp_path / f"{sheet.suffix[1:]}.json"
        assert main(["calibrate", "--texts", str(texts), "--out", str(out), "--coded", str(sheet)]) == 0
        fitted[sheet.suffix] = json.loads(out.read_text())
        assert fitted[sheet.suffix]["fitted_on"].pop("coded") == [str(sheet)]
    assert fitted[".csv"]["fitted_on"]["answers"] == 5
    assert fitted[".csv"] == fitted[".xlsx"]
    capsys.readouterr()
    assert main(["calibrate", "--texts", str(texts), "--out", str(out), "--coded", str(tmp_path / "coded.ods")]) == 2
    assert capsys.readouterr().err.strip() == (f"mlpsych: error: --coded {tmp_path / 'coded.ods'}: expected the "
                                               "results sheet of `mlpsych run` (.xlsx, or its .csv)")


def test_calibrate_names_the_marks_it_cannot_read(tmp_path, caplog):
    """A mark such as "x" was dropped by `mlpsych calibrate` without a word (agree and adapt name it)."""
    from mlpsych.cli import main

    from .conftest import PAPER_A, answer_row, write_sheet

    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "A", "text": PAPER_A}) + "\n")
    sheet = write_sheet(tmp_path / "coded.xlsx", [
        answer_row("A", PAPER_A, "q1", "random forests", correct="yes"),
        answer_row("A", PAPER_A, "q1", "grid search", correct="no"),
        answer_row("A", PAPER_A, "q1", "caret", correct="x"),
    ])
    with caplog.at_level("WARNING"):
        assert main(["calibrate", "--texts", str(texts), "--out", str(tmp_path / "c.json"), "--coded", str(sheet)]) == 0
    assert "skipped 1 unreadable mark(s) (use yes/no; an \"x\" is read neither way" in caplog.text
    assert "row 4 correct='x'" in caplog.text


def test_copies_of_a_sheet_coded_by_two_coders_count_each_answer_once():
    """Two coders each coding some papers in their own copy of the run's sheet: `mlpsych calibrate --coded A B`
    read every answer twice, doubling the size of every list (a feature) and the answers coded both times."""
    from .conftest import HEADER, PAPER_A, answer_row

    def rows(marks):
        return [dict(zip(HEADER, answer_row("A", PAPER_A, q, a, correct=m)), _row=i + 2)
                for i, (q, a, m) in enumerate(zip(("q1", "q1", "q2", "q2"), ("random forests", "grid search",
                                                                              "caret", "R"), marks))]

    whole = cf.labelled(rows(["yes", "no", "yes", None]), {"A": PAPER_A}, {}, lambda row, item: cf.sheet_label(row))
    first, second = rows(["yes", "no", None, None]), rows([None, None, "yes", None])
    merged = cf.labelled(cf.merged_sheets([first, second]), {"A": PAPER_A}, {},
                         lambda row, item: cf.sheet_label(row))
    assert np.array_equal(merged.x, whole.x) and list(merged.y) == list(whole.y) == [True, False, True]
    disputed = cf.merged_sheets([first, rows(["no", "no", None, None])])
    assert [cf.sheet_label(r) for r in disputed] == [None, False, None, None]


def test_calibrate_given_the_same_coding_twice_fits_it_once(tmp_path, coded_sheet, capsys):
    """A sheet given twice (or two coders' copies agreeing) fitted 10 answers of the 5 coded."""
    from mlpsych.cli import main

    from .conftest import PAPER_A, PAPER_B

    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in (("A", PAPER_A), ("B", PAPER_B))))
    copy = tmp_path / "copy.xlsx"
    copy.write_bytes(coded_sheet.read_bytes())
    out = tmp_path / "study.json"
    assert main(["calibrate", "--texts", str(texts), "--out", str(out), "--coded", str(coded_sheet), str(copy)]) == 0
    assert "5 answers (2 correct)" in capsys.readouterr().out  # was 10 answers (4 correct)


def test_agree_calibrate_and_adapt_read_a_coders_mark_alike(tmp_path, documents):
    """An answer marked "yes" with a corrected answer counted as right in `mlpsych agree` and as wrong in
    `mlpsych calibrate`; "√" and "×" were unreadable marks. All three commands now read a mark one way."""
    from mlpsych.coding.coded import coding_from_sheets
    from mlpsych.evaluation import agree
    from mlpsych.evaluation.evaluate import read_sheet

    from .conftest import PAPER_A, answer_row, write_sheet

    rows = [("random forests", "yes", "random forests to predict dropout"),
            ("grid search", None, "logistic regression"), ("caret", None, "the Caret."), ("Support vector", "no", "Support vector machines"),
            ("predict dropout", "√", None), ("feature ranking", "×", None), ("students", "x", None)]
    sheet = write_sheet(tmp_path / "coded.xlsx", [answer_row("A", PAPER_A, "q1", answer, correct=mark,
                                                             corrected=corrected) for answer, mark, corrected in rows])
    expected = [True, False, None, False, True, False, None]  # a correction alike to the answer corrects nothing
    codings, _ = agree.read_codings(sheet)
    assert [c.marks["correct"] for c in codings] == expected
    assert [cf.sheet_label(row) for row in read_sheet(sheet, "answers")] == expected
    originals = {s.text: s.correct for s in coding_from_sheets([sheet], documents).spans if s.how != "corrected"}
    assert originals == {"grid search": False, "Support vector": False, "predict dropout": True,
                         "feature ranking": False}  # the corrected and marked right: its correction the positive


def test_two_writers_of_one_calibrator_file_at_once_leave_one_whole(tmp_path, monkeypatch):
    """Two `mlpsych calibrate --out calib.json` (or two adapts of one reader folder) at once shared the work file
    `calib.json.partial`: the second renamed it into place while the first wrote in it, and the first failed with
    `FileNotFoundError`, reported as a bug in mlpsych. Each now writes its own; the last one written stays."""
    from pathlib import Path

    def calibrator(intercept: float) -> cf.Calibrator:
        n = len(cf.FEATURES)
        return cf.Calibrator([0.0] * n, intercept, [0.0] * n, [1.0] * n, {}, list(cf.FEATURES))

    path = tmp_path / "calib.json"
    write_text, others = Path.write_text, [calibrator(-2.0)]

    def another_save_meanwhile(self: Path, data: str, *args, **kwargs) -> int:
        with self.open("w", encoding="utf-8") as handle:  # this save's file is open ...
            while others:
                others.pop().save(path)  # ... when the other process saves its calibrator
            return handle.write(data)

    monkeypatch.setattr(Path, "write_text", another_save_meanwhile)
    calibrator(1.5).save(path)
    monkeypatch.undo()
    assert cf.Calibrator.load(path).intercept == 1.5
    assert [p.name for p in tmp_path.iterdir()] == ["calib.json"]


def test_a_calibrator_that_cannot_be_written_is_one_line(tmp_path, coded_sheet, capsys):
    """`calibrate --out study.json` where study.json was a folder read the papers, fitted, and then said "this is a
    bug in mlpsych"; a calibrator written into a folder taken by a folder of its name (adapt) alike."""
    from mlpsych.cli import main
    from mlpsych.errors import OutputError

    from .conftest import PAPER_A, PAPER_B

    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in (("A", PAPER_A), ("B", PAPER_B))))
    (tmp_path / "study.json").mkdir()
    assert main(["calibrate", "--texts", str(texts), "--out", str(tmp_path / "study.json"), "--coded",
                 str(coded_sheet)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mlpsych: error: --out {tmp_path / 'study.json'} is a folder") and "\n" not in err
    with pytest.raises(OutputError, match=r"study.json cannot be written \("):
        cf.Calibrator.load().save(tmp_path / "study.json")
