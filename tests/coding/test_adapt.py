"""`mlpsych adapt`: records from the coding, a tiny reader adapted end to end, resume, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlpsych.cli import main
from mlpsych.coding.adapt import (
    AdaptError,
    AdaptOptions,
    adapt,
    adapt_settings,
    AdaptResult,
    adapted_questions,
    describe_adapted,
    build_records,
    passages,
    summary_lines,
    use_adapted,
)
from mlpsych.dev.train_reader import META_FILE
from mlpsych.cache import ResultCache
from mlpsych.coding.coded import Coding, CodedSpan, coding_from_sheets
from mlpsych.documents import Document
from mlpsych.questions import load_question_set
from mlpsych.reading.reader import Query, Reader
from mlpsych.pipeline import Pipeline
from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings

from .conftest import PAPER_A, PAPER_B


@pytest.fixture(scope="module")
def questions():
    return load_question_set("mlpsych")


def test_passages_are_whole_sentences_of_about_the_length_asked():
    cut = passages(PAPER_A, 12)
    assert cut[0][0] == 0 and cut[-1][1] == len(PAPER_A)
    for start, end in cut:
        assert PAPER_A[end - 1] == "." and len(PAPER_A[start:end].split()) <= 20
    assert all(a[1] < b[0] for a, b in zip(cut, cut[1:]))


def test_records_from_the_coding(coded_sheet: Path, documents, questions):
    records = build_records(coding_from_sheets([coded_sheet], documents), documents, questions,
                            AdaptOptions(passage_words=12, negatives=1.0))
    by_kind: dict[str, list] = {}
    for e in records.examples:
        by_kind.setdefault(e.id.split("|")[2], []).append(e)
    for e in records.examples:
        assert e.article == "A"  # paper B was not coded
        if e.answers:
            assert e.context[e.answer_starts[0]:e.answer_starts[0] + len(e.answers[0])] == e.answers[0]
    positives = {(e.question, e.answers[0]) for e in by_kind["positive"]}
    q1, q2 = questions.get("q1").text, questions.get("q2").text
    assert positives == {(q1, "random forests"), (q1, "Support vector machines"), (q2, "caret"), (q2, "R")}
    # "random forests" recurs twice more in the paper (case aside): both are positives too
    assert sorted(e.answers[0] for e in by_kind["repeat"] if e.question == q1) == ["Random forests",
                                                                                    "random forests"]
    # "grid search" was marked wrong and its passage holds no positive: an unanswerable record
    hard = [e for e in by_kind["hard_negative"]]
    assert any("grid search" in e.context and not e.answers for e in hard)
    for e in by_kind.get("negative", []):  # drawn passages never hold a positive's text
        assert not e.answers and "random forests" not in e.context.lower()
    assert records.counts["q1"]["positive"] == 2 and records.counts["q2"]["positive"] == 2


def test_a_coded_sheet_saved_as_csv_gives_the_coding_of_its_workbook(tmp_path: Path, coded_sheet: Path, documents):
    """`mlpsych adapt --coded coded.csv` was refused ("expected the .xlsx results sheet"): a lab coding in Google
    Sheets or LibreOffice saves CSV."""
    from tests.coding.conftest import saved_as_csv

    workbook = coding_from_sheets([coded_sheet], documents)
    saved = coding_from_sheets([saved_as_csv(coded_sheet, tmp_path / "coded.csv")], documents)
    assert saved.spans == workbook.spans and saved.pairs == workbook.pairs and len(saved.spans) == 6
    assert [line.replace("coded.csv", "coded.xlsx") for line in saved.skipped] == workbook.skipped


def test_follow_up_answers_train_on_their_sub_questions(documents, questions):
    start = PAPER_A.index("predict dropout")
    rf = PAPER_A.index("random forests")
    coding = Coding([CodedSpan("A", "q1", "random forests", rf, rf + 14, True, "gold"),
                     CodedSpan("A", "q4", "predict dropout", start, start + 15, True, "gold")],
                    {("A", "q1"), ("A", "q4")})
    records = build_records(coding, documents, questions, AdaptOptions(passage_words=12, negatives=0))
    follow_up = [e for e in records.examples if e.answers and e.answers[0] == "predict dropout"]
    assert [e.question for e in follow_up] == ["What was random forests used for?"]


def test_adapt_writes_a_reader_the_reader_loads_and_resumes(tmp_path: Path, coded_sheet: Path, documents,
                                                            questions, tiny_bert: Path):
    coding = coding_from_sheets([coded_sheet], documents)
    settings = adapt_settings(str(tiny_bert), max_length=64, stride=16, batch_size=4, lr=1e-3, epochs=2,
                              checkpoint_every=1)
    out = tmp_path / "adapted"
    options = AdaptOptions(passage_words=12, min_answers=2)  # two coded answers each of q1 and q2
    stopped = adapt(coding, documents, questions, out, settings, options, checkpoints=tmp_path / "ck", max_steps=2,
                    progress=False)
    assert stopped.out_dir is None and stopped.step == 2 < stopped.steps_total
    assert not out.exists() and not list(tmp_path.glob(".adapted*"))  # no half-written folder
    done = adapt(coding, documents, questions, out, settings, options, checkpoints=tmp_path / "ck",
                 progress=False, source={"coded": [str(coded_sheet)]})
    assert done.resumed_from == 2 and done.step == done.steps_total
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
    meta = json.loads((out / "mlpsych_reader.json").read_text())
    section = meta["adapted"]
    assert section["base_reader"] == str(tiny_bert) and section["papers"] == ["A"]
    assert section["questions"]["q1"]["positive"] == 2 and section["records"] == done.meta["adapted"]["records"]
    assert any("XGBoost" in line for line in section["skipped"])
    assert adapted_questions(out) == ["q1", "q2"]
    assert adapted_questions(tiny_bert) is None
    spans = Reader(str(out), ReaderSettings(device="cpu", dtype="fp32", stride=16)).run(
        Document("B", PAPER_B), [Query("q1", questions.get("q1").text, top_k=3, max_answer_tokens=10)])
    assert len(spans[0]) == 3 and all(PAPER_B[s.start:s.end] == s.text for s in spans[0])

    # `run --adapted`: the reader answers the questions it was adapted on, and the run sheet says so
    run_questions = use_adapted(questions.select(["q1", "q2", "q3"]), [out])
    assert run_questions.get("q1").models == run_questions.get("q2").models == [str(out)]
    assert run_questions.get("q3").models == questions.get("q3").models
    only_adapted = run_questions.select(["q1", "q2"])
    run_settings = RunSettings(reader=ReaderSettings(max_length=64, stride=16, question_tokens=24),
                               llm=LLMSettings(enabled=False))
    result = Pipeline(only_adapted, run_settings, ResultCache(tmp_path / "cache"), progress=False).run(
        [Document("B", PAPER_B)])
    line, = result.info.adapted_readers
    assert line.startswith(f"{out}: answered q1, q2; adapted from {tiny_bert} on 1 coded papers")
    with pytest.raises(AdaptError, match="not a reader folder written by `mlpsych adapt`"):
        use_adapted(questions, [tiny_bert])
    with pytest.raises(AdaptError, match="none of which this run asks"):
        use_adapted(questions.select(["q3"]), [out])
    with pytest.raises(AdaptError, match=r"--adapted .*adapted-typo: no such folder"):  # was "no 'adapted' section"
        use_adapted(questions, [tmp_path / "adapted-typo"])


def test_refusals(tmp_path: Path, documents, questions, tiny_bert: Path):
    settings = adapt_settings(str(tiny_bert), max_length=64, stride=16, batch_size=4)
    with pytest.raises(AdaptError, match="no coded answers: .*'correct' column"):
        adapt(Coding(), documents, questions, tmp_path / "r", settings)
    only_wrong = Coding([CodedSpan("A", "q1", "grid search", 0, 11, False, "wrong")], {("A", "q1")})
    with pytest.raises(AdaptError, match="no answer that was found"):
        adapt(only_wrong, documents, questions, tmp_path / "r", settings)
    unknown = Coding([CodedSpan("A", "q9", "x", 0, 1, True, "gold")], {("A", "q9")})
    with pytest.raises(AdaptError, match="q9 are not in the question file"):
        adapt(unknown, documents, questions, tmp_path / "r", settings)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    good = Coding([CodedSpan("A", "q1", "random forests", 0, 1, True, "gold")], {("A", "q1")})
    with pytest.raises(AdaptError, match="not a reader folder"):
        adapt(good, documents, questions, busy, settings)


def test_command_line_refuses_in_one_line(tmp_path: Path, capsys, tiny_bert: Path):
    from tests.coding.conftest import HEADER, write_sheet

    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "A", "text": PAPER_A}) + "\n", encoding="utf-8")
    uncoded = write_sheet(tmp_path / "u.xlsx", [["A", "", "q1", "?", "random forests", "extractive"]
                                                 + [None] * (len(HEADER) - 6)])  # blank stage: a coder's row
    args = ["adapt", "--reader", str(tiny_bert), "--texts", str(texts), "--out", str(tmp_path / "out"),
            "--no-progress", "--coded"]
    assert main(args + [str(uncoded)]) == 2
    assert "mark answers in the 'correct' column" in capsys.readouterr().err
    assert main(args + [str(tmp_path / "coded.ods")]) == 2
    assert "expected the results sheet of `mlpsych run` (.xlsx, or its .csv)" in capsys.readouterr().err
    other = write_sheet(tmp_path / "o.xlsx", [["Z", "", "q1", "?", "x", None, None, None, None, None, None, None,
                                               None, None, None, "yes"]])
    assert main(args + [str(other)]) == 2
    err = capsys.readouterr().err
    assert "not in the texts given: Z" in err and "Traceback" not in err
    # Z's file is there but could not be read: said so, not left to look like a paper of another corpus
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "A.txt").write_text(PAPER_A, encoding="utf-8")
    (folder / "Z.pdf").write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40)
    assert main([*args[:4], str(folder), *args[5:], str(other)]) == 2
    err = capsys.readouterr().err
    assert "not in the texts given: Z" in err
    assert "--texts holds but could not read: Z (corrupt or unreadable PDF" in err
    coded = write_sheet(tmp_path / "c.xlsx", [["A", "", "q1", "?", "random forests", None, None, None, None, None,
                                               None, None, None, None, None, "yes"]])
    assert main(args[:-1] + ["--device", "tpu", "--coded", str(coded)]) == 2
    assert "mlpsych: error: unknown device 'tpu'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_out_that_cannot_become_a_reader_folder_is_one_line_before_training(tmp_path: Path, capsys, where,
                                                                               tiny_bert: Path):
    """`--out notes.txt` ended in "NotADirectoryError ... this is a bug"; an --out in a place that takes no folder
    (read-only, or under a file) trained first, then ended so at the write."""
    from tests.coding.conftest import answer_row, write_sheet

    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "A", "text": PAPER_A}) + "\n", encoding="utf-8")
    coded = write_sheet(tmp_path / "c.xlsx", [answer_row("A", PAPER_A, "q1", "random forests", correct="yes")])
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    out = tmp_path / "notes.txt" / ("" if where == "a file" else "reader")
    assert main(["adapt", "--reader", str(tiny_bert), "--texts", str(texts), "--coded", str(coded), "--out", str(out),
                 "--checkpoints", str(tmp_path / "ck"), "--epochs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mlpsych: error: --out {out}"), err
    assert ("is a file: a reader is a folder" if where == "a file" else "cannot write a folder in") in err[0]
    assert not (tmp_path / "ck").exists()  # nothing was trained
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_a_killed_adapts_half_written_folder_is_removed_by_the_next(tmp_path: Path, documents, questions,
                                                                    tiny_bert: Path):
    """A SIGKILL (or power cut) while the reader was written left its hidden `.NAME.partial-PID` folder, a reader's
    size, beside --out for good; an interrupted or failed write leaves none either."""
    import os
    import time

    killed = tmp_path / ".adapted.partial-1"
    killed.mkdir()
    (killed / "model.safetensors").write_bytes(b"half")
    hour_ago = time.time() - 3700
    for path in (killed / "model.safetensors", killed):
        os.utime(path, (hour_ago, hour_ago))
    running = tmp_path / ".adapted.partial-2"  # another adapt's write under way: left to it
    running.mkdir()
    start = PAPER_A.index("random forests")
    coding = Coding([CodedSpan("A", "q1", "random forests", start, start + 14, True, "gold")], {("A", "q1")})
    settings = adapt_settings(str(tiny_bert), max_length=64, stride=16, batch_size=4, epochs=1)
    done = adapt(coding, documents, questions, tmp_path / "adapted", settings,
                 AdaptOptions(passage_words=12, calibration_folds=0), checkpoints=tmp_path / "ck", progress=False)
    assert done.out_dir == tmp_path / "adapted" and (done.out_dir / META_FILE).is_file()
    assert not killed.exists() and running.exists()
    assert sorted(p.name for p in tmp_path.glob(".adapted*")) == [running.name]


def test_a_reader_another_adapt_wrote_meanwhile_does_not_get_this_ones_calibrator(tmp_path: Path, documents,
                                                                                 questions, tiny_bert: Path,
                                                                                 monkeypatch):
    """Two adapts of one --out at once (two coders' sheets): each wrote its reader, cross-fitted its calibrator for
    minutes, then saved it into --out, where the other's reader may be by then: a reader with the other one's
    calibrator, without a word. The calibrator is now saved only beside its own reader, and the summary says why."""
    import json

    from mlpsych.coding import adapt as adapt_module
    from mlpsych.coding import confidence as cf
    from mlpsych.coding.crossfit import CALIBRATOR_FILE, CrossFitted

    out = tmp_path / "adapted"

    def the_other_adapt_writes_meanwhile(*args, **kwargs) -> CrossFitted:
        meta = json.loads((out / META_FILE).read_text(encoding="utf-8"))
        (out / META_FILE).write_text(json.dumps({**meta, "fingerprint": "the other coding"}), encoding="utf-8")
        n = len(cf.FEATURES)
        return CrossFitted(cf.Calibrator([0.0] * n, 0.0, [0.0] * n, [1.0] * n, {}, list(cf.FEATURES)))

    monkeypatch.setattr(adapt_module, "_calibrate", the_other_adapt_writes_meanwhile)
    start = PAPER_A.index("random forests")
    coding = Coding([CodedSpan("A", "q1", "random forests", start, start + 14, True, "gold")], {("A", "q1")})
    settings = adapt_settings(str(tiny_bert), max_length=64, stride=16, batch_size=4, epochs=1)
    done = adapt(coding, documents, questions, out, settings, AdaptOptions(passage_words=12),
                 checkpoints=tmp_path / "ck", progress=False)
    assert not (out / CALIBRATOR_FILE).exists()
    assert done.calibration.calibrator is None and "another adapt wrote its reader to" in done.calibration.reason


def test_command_line_cross_fits_three_folds_unless_told(tmp_path: Path, capsys, tiny_bert: Path):
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "A", "text": PAPER_A}) + "\n", encoding="utf-8")
    start = PAPER_A.index("random forests")
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps({"q1": {"A": [{"start": start, "end": start + 14, "text": "random forests"}]}}))
    args = ["adapt", "--reader", str(tiny_bert), "--texts", str(texts), "--gold", str(gold), "--epochs", "1",
            "--batch-size", "4", "--min-answers", "1", "--no-progress", "--checkpoints", str(tmp_path / "ck")]
    assert main(args + ["--out", str(tmp_path / "default")]) == 0
    assert "1 coded paper(s): too few for 3 folds" in capsys.readouterr().out
    assert main(args + ["--out", str(tmp_path / "off"), "--calibration-folds", "0", "--micro-batch-size", "2",
                        "--device", "cpu"]) == 0
    assert "cross-fitting turned off" in capsys.readouterr().out
    meta = json.loads((tmp_path / "off" / META_FILE).read_text())
    assert meta["adapted"]["options"]["calibration_folds"] == 0 and meta["adapted"]["options"]["min_answers"] == 1
    assert meta["settings"]["micro_batch_size"] == 2 and meta["trained_on"] == "cpu"


def test_questions_with_too_few_coded_answers_keep_their_base_reader(tmp_path: Path, questions):
    folder = tmp_path / "adapted"
    folder.mkdir()
    section = {"base_reader": "base", "papers": ["A", "B"], "records": 60, "replay": {"records": 0}, "skipped": [],
               "questions": {"q1": {"positive": 20}, "q3": {"positive": 5}}, "options": {"min_answers": 16}}
    (folder / META_FILE).write_text(json.dumps({"adapted": section}))
    assert adapted_questions(folder) == ["q1"]
    run_questions = use_adapted(questions.select(["q1", "q3"]), [folder])
    assert run_questions.get("q1").models == [str(folder)]
    assert run_questions.get("q3").models == questions.get("q3").models
    lines = summary_lines(AdaptResult(folder, tmp_path, 4, 4, 0, {"adapted": section}))
    assert any(line.startswith("  q3: 5 answers") and "keep the base reader" in line for line in lines)
    assert not any(line.startswith("  q1:") and "keep the base reader" in line for line in lines)
    assert "use this reader for q1 (a question needs 16" in lines[-1]

    section["options"]["min_answers"] = 30
    (folder / META_FILE).write_text(json.dumps({"adapted": section}))
    with pytest.raises(AdaptError, match="no question had the 30 coded answers .*q1: 20, q3: 5"):
        use_adapted(questions.select(["q1", "q3"]), [folder])
    del section["options"]  # a folder written before the option: the default applies
    (folder / META_FILE).write_text(json.dumps({"adapted": section}))
    assert adapted_questions(folder) == ["q1"]
    section["questions"]["q1"]["positive"] = 15
    (folder / META_FILE).write_text(json.dumps({"adapted": section}))
    with pytest.raises(AdaptError, match="no question had the 16 coded answers"):
        use_adapted(questions.select(["q1", "q3"]), [folder])


def test_a_reader_adapted_on_another_files_question_of_the_same_id_is_refused(tmp_path: Path, questions):
    """A reader adapted on a study's own file, whose q1 asks for the sample size, answered mlpsych's q1 (the
    techniques) in a run given no --questions, without a word."""
    folder = tmp_path / "adapted"
    folder.mkdir()
    asked = questions.get("q1").text
    section = {"base_reader": "base", "papers": ["A"], "options": {"min_answers": 1},
               "questions": {"q1": {"text": "How many participants took part?", "positive": 20}}}
    (folder / META_FILE).write_text(json.dumps({"adapted": section}))
    with pytest.raises(AdaptError, match=r"adapted on another question q1 \('How many participants took part\?'\) "
                                         r"than this run's .*give the question file it was adapted with"):
        use_adapted(questions.select(["q1"]), [folder])
    section["questions"]["q1"]["text"] = "  " + asked.upper().replace(" ", "\n ")  # spacing and case aside
    (folder / META_FILE).write_text(json.dumps({"adapted": section}))
    assert use_adapted(questions.select(["q1"]), [folder]).get("q1").models == [str(folder)]


@pytest.mark.parametrize("edit", [{"questions": {"q1": 5}}, {"options": {"min_answers": "16"}}, {"options": [16]},
                                  {"source": {"coded": "sheet.xlsx"}}, {"source": {"coded": [1]}}, {"source": "x"}],
                         ids=["counts", "min-text", "options-list", "coded-text", "coded-number", "source-text"])
def test_a_hand_edited_adapted_section_is_read_as_a_plain_reader(tmp_path: Path, edit, caplog):
    """A shared reader folder whose mlpsych_reader.json held "q1": 5 for its counts stopped `mlpsych run` after
    every paper was read ("AttributeError: 'int' object has no attribute 'get' ... this is a bug"): the run sheet's
    line about the reader read it."""
    folder = tmp_path / "adapted"
    folder.mkdir()
    section = {"base_reader": "base", "papers": ["A", "B"], "questions": {"q1": {"positive": 20}},
               "options": {"min_answers": 16}, "source": {"coded": ["sheet.xlsx"]}}
    (folder / META_FILE).write_text(json.dumps({"adapted": section}))
    assert adapted_questions(folder) == ["q1"] and "sheet.xlsx" in describe_adapted(folder)
    (folder / META_FILE).write_text(json.dumps({"adapted": {**section, **edit}}))
    assert adapted_questions(folder) is None and describe_adapted(folder) is None
    assert "not as `mlpsych adapt` writes it" in caplog.text
