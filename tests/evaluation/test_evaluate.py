"""The evaluation harness on a small made-up dataset whose table is computed by hand below."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from pathlib import Path

import pytest

from mlpsych.cli import eval_cmd
from mlpsych.errors import UserError
from mlpsych.evaluation import evaluate as ev
from mlpsych.evaluation.metrics import normalize_answer

TEXTS = {
    "p1": "We used random forests (RF) and LASSO in SPSS and R to predict the occurrence of IPV.",
    "p2": "A support vector machine (SVM) asked whether tweets predict mood, written in Python.",
    "p3": "k-means clustering grouped the answers.",
    "p4": "A paper nobody ran.",
    "p9": "A held-out paper without gold.",
}
GOLD = {
    "q1": {
        "p1": [{"start": 8, "end": 27, "text": "random forests (RF)"}, {"start": 32, "end": 37, "text": "LASSO"}],
        "p2": [{"start": 27, "end": 30, "text": "SVM"}],
        "p3": [{"start": 0, "end": 18, "text": "k-means clustering"}],
        "p4": [{"start": 2, "end": 7, "text": "paper"}],
    },
    "q2": {"p1": [{"start": 41, "end": 45, "text": "SPSS"}, {"start": 50, "end": 51, "text": "R"}]},
    "q3": {"p2": [{"start": 38, "end": 65, "text": "whether tweets predict mood"}]},
    "q4": {"p1": [{"start": 55, "end": 84, "text": "predict the occurrence of IPV"}]},
}
RAN = {k: v for k, v in TEXTS.items() if k != "p4"}  # the corpus of the run: p4 was never run
A, B = "deberta", "roberta"


def row(paper, question, answer, models, stage="extractive", **extra):
    return {"paper_id": paper, "source_file": f"{paper}.txt", "question_id": question, "question": "?",
            "answer": answer, "stage": stage, "models": models, "score": 0.5, "start": None, "end": None,
            "page": 1, "evidence": "", "bridge_entity": None, **extra}


ROWS = [
    # model A
    row("p1", "q1", "random forest", [A]), row("p1", "q1", "RF", [A]), row("p2", "q1", "SVM", [A]),
    row("p1", "q2", "SPSS", [A]), row("p2", "q2", "Python", [A]),
    row("p2", "q3", "tweets predict mood", [A]),
    row("p1", "q4", "predict the occurrence of IPV", [A], bridge_entity="random forest"),
    row("p1", "q4:LASSO", "avoid overfitting", [A], bridge_entity="LASSO"),
    row("p9", "q1", "neural network", [A]),  # held-out paper: not scored
    # model B
    row("p1", "q1", "LASSO", [B]), row("p2", "q1", "support vector machine", [B]),
    row("p3", "q1", "k-means clustering", [B]),
    row("p1", "q2", "R software", [B]), row("p3", "q2", "SAS", [B]),
    # combined ensemble (extractive): ensemble rows carry several models or the ensemble flag
    row("p1", "q1", "random forest", [A, B], ensemble=True), row("p1", "q1", "LASSO", [A, B], ensemble=True),
    row("p2", "q1", "SVM", [A, B]), row("p3", "q1", "k-means clustering", [A], ensemble=True),
    # normalized answers, as the exporter writes them: each lists the models whose LLM output held it
    row("p1", "q1", "random forests", [A], "normalized"), row("p1", "q1", "LASSO", [B], "normalized"),
    row("p2", "q1", "SVM", [A, B], "normalized"), row("p3", "q1", "k-means", [B], "normalized"),
    row("p1", "q1", "gradient boosting", [A], "ungrounded"),
    row("p1", "q2", "SPSS", [A], "normalized"), row("p1", "q2", "R", [B], "normalized"),
]

# Hand-computed tables. Papers scored: p1-p3 (p4 is not in the run's corpus RAN; p9 has no gold).
# test_eval_rules.py adds p4 to the corpus (no prediction: scored 0, or an error when the run lacks it).
#
# --stage extractive
# q1, model A: p1 gold [random forests rf | lasso] vs [random forest, rf]: F1 (max(.4,.5) + 0)/2 = .25,
#   EM 0, Ment .5 (RF by the parenthesis rule); p2 SVM=SVM: 1,1,1; p3 nothing: 0,0,0
#   -> F1 1.25/3, EM 1/3, Ment 1.5/3, spans/answer 3/3, words/span (2+1+1)/3
# q1, model B: p1 [lasso]: .5,.5,.5; p2 "support vector machine" vs SVM: 0,0,0; p3 exact: 1,1,1
#   -> F1 .5, EM .5, Ment .5, spans/answer 1, words/span (1+3+2)/3 = 2
# q1, combined: p1 [random forest, lasso] -> (.4+1)/2 = .7; p2 1; p3 1 -> F1 2.7/3
# q2 (unanswerable; empty gold: EM, Ment 1 if nothing is predicted else 0, F1 undefined and left out of the mean)
# q2, model A: p1 [spss] vs gold [spss, r]: .5,.5,.5; p2 [] gold, "Python" -> EM, Ment 0; p3 [] vs [] -> EM, Ment 1
#   -> F1 .5 (p1 only), EM .5, Ment .5
# q2, model B: p1 "R software": SPSS 0, R F1 2/3 and whole-word mention -> F1 1/3, EM 0, Ment .5; p2 nothing -> 1;
#   p3 "SAS" -> 0  => F1 1/3 (p1 only; counting p2 and p3 gave (1/3+1+0)/3), EM 1/3, Ment .5
EXTRACTIVE = {
    ("q1", A): {"F1": 1.25 / 3, "EMat": 1 / 3, "Ment": 0.5, "spans/answer": 1.0, "words/span": 4 / 3, "n": 3},
    ("q1", B): {"F1": 0.5, "EMat": 0.5, "Ment": 0.5, "spans/answer": 1.0, "words/span": 2.0, "n": 3},
    ("q1", "combined"): {"F1": 0.9, "n": 3},
    ("q2", A): {"F1": 0.5, "EMat": 0.5, "Ment": 0.5, "spans/answer": 2 / 3, "n": 3},
    ("q2", B): {"F1": 1 / 3, "EMat": 1 / 3, "Ment": 0.5, "spans/answer": 2 / 3, "n": 3},
}
# --stage best (default): normalized where the row has normalized answers for the paper, else extractive
# q1, model A: p1 [random forests]: gold1 P=1 R=2/3 F1=.8, gold2 0 -> .4, EM 0, Ment .5 (head part);
#   p2 [SVM] 1,1,1; p3 nothing -> F1 1.4/3, EM 1/3, Ment 1.5/3, spans/answer 2/3, words/span 3/2
# q1, model B: p1 [lasso] .5,.5,.5; p2 [SVM] 1,1,1; p3 [k-means] vs "k-means clustering": F1 2/3, EM 0, Ment 0
#   -> F1 (.5+1+2/3)/3, EM .5, Ment .5, spans/answer 1, words/span 1
# q1, combined = union of the normalized answers: p1 [random forests, lasso]: (.8+1)/2 = .9, EM .5, Ment 1;
#   p2 1,1,1; p3 [k-means]: 2/3, 0, 0 -> F1 (.9+1+2/3)/3, EM 1.5/3, Ment 2/3, spans/answer 4/3, words/span 5/4
# q2, model A: p1 [SPSS] .5; p2 no normalized answer, falls back to extractive "Python" -> EM 0; p3 nothing -> EM 1
#   -> F1 .5 (p1 only), EM .5
# q2, model B: p1 [R] .5 (EM .5, Ment .5); p2 nothing -> EM 1; p3 falls back to "SAS" -> EM 0 -> F1 .5, EM .5
# q2, combined: p1 [SPSS, R] -> 1; p2, p3 nothing -> EM 1 (F1 over p1 alone: 1)
# q3 (only p2 annotated), model A: [whether tweets predict mood] vs [tweets predict mood] P=1 R=3/4 -> 6/7
# q4 (only p1), model A: both sub-question answers form the list; gold equals one of them -> 1, spans/answer 2
EXPECTED = {
    ("q1", A): {"F1": 1.4 / 3, "EMat": 1 / 3, "Ment": 0.5, "spans/answer": 2 / 3, "words/span": 1.5, "n": 3},
    ("q1", B): {"F1": (0.5 + 1 + 2 / 3) / 3, "EMat": 0.5, "Ment": 0.5, "spans/answer": 1.0, "words/span": 1.0},
    ("q1", "combined"): {"F1": (0.9 + 1 + 2 / 3) / 3, "EMat": 0.5, "Ment": 2 / 3, "spans/answer": 4 / 3,
                         "words/span": 1.25, "n": 3},
    ("q2", A): {"F1": 0.5, "EMat": 0.5, "Ment": 0.5, "n": 3},
    ("q2", B): {"F1": 0.5, "EMat": 0.5, "Ment": 0.5, "n": 3},
    ("q2", "combined"): {"F1": 1.0, "EMat": 1.0, "Ment": 1.0, "n": 3},
    ("q3", A): {"F1": 6 / 7, "EMat": 0.0, "Ment": 0.0, "n": 1},
    ("q4", A): {"F1": 1.0, "EMat": 1.0, "Ment": 1.0, "spans/answer": 2.0, "n": 1},
}


def _by_key(table):
    return {(r.question, r.model): r for r in table}


def _check(table, expected):
    rows = _by_key(table)
    assert set(rows) == set(expected)
    for key, values in expected.items():
        for metric, value in values.items():
            assert rows[key].metrics[metric] == pytest.approx(value), (key, metric)
        assert math.isnan(rows[key].metrics["SMat"])
    return rows


def test_table_matches_hand_computation():
    table = ev.evaluate(ev.gold_from_dict(GOLD), ROWS, texts=RAN)
    rows = _check(table, EXPECTED)
    _check(ev.evaluate(ev.gold_from_dict(GOLD), ROWS), EXPECTED)  # without texts: the papers mentioned, the same
    assert rows[("q1", "combined")].stage == "normalized" and rows[("q4", A)].stage == "extractive"
    assert rows[("q2", A)].stage == "normalized 1/2"  # p2 fell back to extractive, p3 had no answer
    assert [r.question for r in table] == ["q1"] * 3 + ["q2"] * 3 + ["q3", "q4"]
    assert [r.model for r in table if r.question == "q1"] == [A, B, "combined"]


def test_stage_option():
    gold = ev.gold_from_dict(GOLD)
    _check(ev.evaluate(gold, ROWS, questions=["q1", "q2"], stage="extractive"), EXTRACTIVE)
    normalized = _by_key(ev.evaluate(gold, ROWS, questions=["q2"], stage="normalized"))
    # normalized only: A p1 [SPSS] .5, p2 and p3 nothing -> EM 1 each, F1 left out
    assert normalized[("q2", A)].metrics["F1"] == pytest.approx(0.5)
    assert normalized[("q2", A)].metrics["EMat"] == pytest.approx(2.5 / 3)


def test_a_row_a_coder_typed_in_is_not_scored_as_the_tools_answer():
    """A row added by hand to a results sheet leaves ``stage`` blank: a coder's answer, as agree and adapt read it
    (mlpsych.marks.row_stage); scored as the tool's, it lifted model A's extractive q2 F1 from 0.5 to 1 here."""
    typed_in = row("p1", "q2", "R", [A], stage="")
    without_column = {k: v for k, v in typed_in.items() if k != "stage"}  # a file that says nothing of stages
    gold = ev.gold_from_dict(GOLD)
    for added, f1 in ((typed_in, 0.5), (without_column, 1.0)):
        for stage in ("extractive", "best"):
            scored = _by_key(ev.evaluate(gold, ROWS + [added], questions=["q2"], stage=stage, texts=RAN))
            assert scored[("q2", A)].metrics["F1"] == pytest.approx(f1 if stage == "extractive" else 0.5)


def test_similar_match_with_injected_similarity():
    def shares_a_word(a: str, b: str) -> float:
        return 0.9 if set(normalize_answer(a).split()) & set(normalize_answer(b).split()) else 0.0

    rows = _by_key(ev.evaluate(ev.gold_from_dict(GOLD), ROWS, questions=["q1"], similarity=shares_a_word,
                               stage="extractive"))
    # model B: p1 LASSO only (.5), p2 "SVM" shares no word with "support vector machine" (0), p3 (1)
    assert rows[("q1", B)].metrics["SMat"] == pytest.approx(0.5)
    # model A: p1 "random forest" ~ gold1 (.5), p2 1, p3 nothing 0
    assert rows[("q1", A)].metrics["SMat"] == pytest.approx(0.5)


def test_bootstrap_intervals_bracket_the_value():
    table = ev.evaluate(ev.gold_from_dict(GOLD), ROWS, questions=["q1"], bootstrap=300, seed=1)
    again = ev.evaluate(ev.gold_from_dict(GOLD), ROWS, questions=["q1"], bootstrap=300, seed=1)
    for row, same in zip(table, again):
        lo, hi = row.intervals["F1"]
        assert lo <= row.metrics["F1"] <= hi and lo < hi
        assert row.intervals == same.intervals
    assert "[" in ev.to_markdown(table)


def test_unknown_question_and_stage_are_user_errors():
    with pytest.raises(ev.EvalInputError, match="q7"):
        ev.evaluate(ev.gold_from_dict(GOLD), ROWS, questions=["q7"])
    with pytest.raises(ev.EvalInputError, match="stage"):
        ev.evaluate(ev.gold_from_dict(GOLD), ROWS, stage="final")


def test_question_without_scorable_papers_is_skipped():
    only_p1 = [r for r in ROWS if r["paper_id"] == "p1"]
    table = ev.evaluate(ev.gold_from_dict(GOLD), only_p1)
    assert "q3" not in {r.question for r in table}  # q3 is annotated for p2 only
    assert {r.metrics["n"] for r in table} == {1}


def test_paper_ids_resolve_by_file_stem():
    renamed = [dict(r, paper_id=f"hash-{r['paper_id']}") for r in ROWS]
    rows = _by_key(ev.evaluate(ev.gold_from_dict(GOLD), renamed, questions=["q1"], texts=RAN))
    assert rows[("q1", B)].metrics["F1"] == pytest.approx((0.5 + 1 + 2 / 3) / 3)


def _write_dataset(tmp_path: Path, corpus: dict[str, str] = RAN) -> tuple[Path, Path, Path]:
    texts = tmp_path / "text.json"
    texts.write_text(json.dumps(json.dumps(corpus)), encoding="utf-8")  # encoded twice, as published
    gold = tmp_path / "answers.json"
    gold.write_text(json.dumps(GOLD), encoding="utf-8")
    pred = tmp_path / "results.jsonl"
    pred.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return texts, gold, pred


def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    eval_cmd.add_parser(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_writes_csv_and_markdown(tmp_path, capsys):
    texts, gold, pred = _write_dataset(tmp_path)
    out = tmp_path / "report"
    assert _run_cli(["eval", "--texts", str(texts), "--gold", str(gold), "--pred", str(pred), "--no-similar",
                     "--questions", "q1,q2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "### q1" in printed and "### q3" not in printed
    lines = list(csv.DictReader(io.StringIO((out / "eval.csv").read_text())))
    found = {(r["question"], r["model"]): r for r in lines}
    assert float(found[("q1", "combined")]["F1"]) == pytest.approx((0.9 + 1 + 2 / 3) / 3, abs=1e-5)
    assert float(found[("q2", B)]["EMat"]) == pytest.approx(0.5, abs=1e-5)
    assert found[("q1", A)]["SMat"] == ""
    assert (out / "eval.md").read_text().startswith("### q1")


def test_cli_texts_take_what_the_run_read(tmp_path):
    # The corpus may be given as the run's input: a folder of papers (ids are file stems) or ingest's texts.jsonl.
    from mlpsych.ingest import load_documents, write_jsonl

    texts, gold, pred = _write_dataset(tmp_path)
    folder = tmp_path / "papers"
    folder.mkdir()
    for paper, text in RAN.items():
        (folder / f"{paper}.txt").write_text(text, encoding="utf-8")
    jsonl = tmp_path / "texts.jsonl"
    write_jsonl(load_documents(folder, progress=False), jsonl)
    tables = {}
    for name, corpus in (("text.json", texts), ("folder", folder), ("jsonl", jsonl)):
        out = tmp_path / f"{name}.csv"
        assert _run_cli(["eval", "--texts", str(corpus), "--gold", str(gold), "--pred", str(pred), "--no-similar",
                         "--out", str(out)]) == 0
        tables[name] = out.read_text()
    assert tables["folder"] == tables["jsonl"] == tables["text.json"]
    # every paper of the corpus is scored: a paper of the folder that the run never read fails the check
    (folder / "p4.txt").write_text(TEXTS["p4"], encoding="utf-8")
    with pytest.raises(UserError, match="p4"):
        _run_cli(["eval", "--texts", str(folder), "--gold", str(gold), "--pred", str(pred), "--no-similar"])


def _export(tmp_path: Path, suffix: str, corpus: dict[str, str] = RAN,
            errors: dict[str, list[str]] | None = None) -> Path:
    """Write ROWS through the project's own exporter (the contract `mlpsych eval` reads): a run of ``corpus``
    whose papers had these ``errors`` (the papers sheet's status)."""
    from mlpsych.answers import Answer
    from mlpsych.documents import Document
    from mlpsych.export import write_result
    from mlpsych.pipeline import RunResult
    from mlpsych.questions import load_question_sets

    answers = []
    for r in ROWS:
        ensemble = bool(r.get("ensemble")) or len(r["models"]) > 1 and r["stage"] == "extractive"
        final = r["stage"] == "normalized" or r["question_id"].startswith(("q3", "q4"))  # others: "model_answers"
        answers.append(Answer(doc_id=r["paper_id"], question_id=r["question_id"].split(":")[0], text=r["answer"],
                              stage=r["stage"], models=list(r["models"]), score=r["score"],
                              bridge_entity=r["bridge_entity"], ensemble=ensemble, final=final))
    result = RunResult(documents=[Document(id=k, text=v, source_path=f"{k}.txt") for k, v in corpus.items()],
                       questions=load_question_sets(["mlpsych"]), answers=answers, errors=dict(errors or {}))
    return write_result(result, tmp_path / f"results{suffix}")


@pytest.mark.parametrize("suffix", [".xlsx", ".jsonl"])
def test_cli_reads_the_exporters_files(tmp_path, suffix):
    _, gold, _ = _write_dataset(tmp_path)
    pred = _export(tmp_path, suffix)
    if suffix == ".xlsx":
        sheets = {name: len(ev.read_sheet(pred, name)) for name in ("answers", "model_answers")}
        assert sheets["answers"] > 0 and sheets["model_answers"] > 0
    out = tmp_path / "table.csv"
    assert _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar", "--out", str(out)]) == 0
    found = {(r["question"], r["model"]): r for r in csv.DictReader(io.StringIO(out.read_text()))}
    assert set(found) == set(EXPECTED)
    for key, values in EXPECTED.items():
        for metric, value in values.items():
            assert float(found[key][metric]) == pytest.approx(value, abs=1e-5), (key, metric)


def test_cli_errors_are_one_line_user_errors(tmp_path):
    texts, gold, pred = _write_dataset(tmp_path)
    with pytest.raises(UserError, match="no such file"):
        _run_cli(["eval", "--gold", str(tmp_path / "missing.json"), "--pred", str(pred), "--no-similar"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"paper_id": "p1"\n', encoding="utf-8")
    with pytest.raises(UserError, match="bad.jsonl:1"):
        _run_cli(["eval", "--gold", str(gold), "--pred", str(bad), "--no-similar"])
    with pytest.raises(UserError, match="q9"):
        _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar", "--questions", "q9"])


def test_a_spreadsheet_given_as_gold_is_a_user_error(tmp_path):
    """`mlpsych eval --gold results.xlsx` (the coded sheet taken for gold) ended in UnicodeDecodeError, "a bug"."""
    pred = _export(tmp_path, ".xlsx")
    with pytest.raises(UserError, match=r"results.xlsx: not JSON text \(a spreadsheet\?\)"):
        _run_cli(["eval", "--gold", str(pred), "--pred", str(pred), "--no-similar"])


def test_gold_given_as_pred_is_said_to_be_no_run_output(tmp_path):
    """`--pred gold.json` (the two swapped) was refused as "gold.json:1: not valid JSON", though it is valid JSON."""
    _, gold, _ = _write_dataset(tmp_path)
    pretty = tmp_path / "gold-indented.json"
    pretty.write_text(json.dumps(GOLD, indent=1), encoding="utf-8")
    with pytest.raises(UserError, match=r"gold-indented.json: one JSON document, not the answers of `mlpsych run`"):
        _run_cli(["eval", "--gold", str(gold), "--pred", str(pretty), "--no-similar"])


def test_hand_written_gold_slips_are_one_line_errors(tmp_path):
    """A paper's gold typed as one string was scored one character at a time ("SVM" as "S", "V", "M"); a span
    without "text" stopped `mlpsych eval` with KeyError 'text'. Both now name the question and paper."""
    texts, _, pred = _write_dataset(tmp_path)
    for value, message in ((("SVM"), r"gold.json: q1 p2: expected a list of answers .* not str 'SVM'"),
                           ([{"start": 27, "end": 30}], r"gold.json: q1 p2: an answer without \"text\"")):
        gold = tmp_path / "gold.json"
        gold.write_text(json.dumps({"q1": {**GOLD["q1"], "p2": value}}), encoding="utf-8")
        with pytest.raises(UserError, match=message):
            _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar"])
    gold = ev.gold_from_dict({"q1": {"p1": None, "p2": ["SVM", 120, {"text": None}]}})
    assert gold == {"q1": {"p1": [], "p2": ["SVM", "120"]}}


def test_out_named_like_a_spreadsheet_is_refused_before_scoring(tmp_path):
    """`--out eval.xlsx` made a folder named eval.xlsx (holding eval.csv and eval.md) after all the scoring."""
    texts, gold, pred = _write_dataset(tmp_path)
    for name in ("eval.xlsx", "notes.txt"):
        with pytest.raises(UserError, match=rf"--out .*{name}: give a .csv or .md file name, or a folder"):
            _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar", "--out", str(tmp_path / name)])
        assert not (tmp_path / name).exists()
    (tmp_path / "run.v2").mkdir()  # a folder that is there may have a dot in its name
    assert _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar", "--out",
                     str(tmp_path / "run.v2")]) == 0
    assert (tmp_path / "run.v2" / "eval.md").is_file()


def test_an_out_that_cannot_be_written_is_one_line_not_a_bug(tmp_path):
    """`--out scores.md` that is a folder, or an --out folder whose eval.csv is a folder, ended in "this is a bug in
    mlpsych" (the first after all the scoring)."""
    texts, gold, pred = _write_dataset(tmp_path)
    (tmp_path / "scores.md").mkdir()
    with pytest.raises(UserError, match=r"--out .*scores.md is a folder"):
        _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar", "--out",
                  str(tmp_path / "scores.md")])
    (tmp_path / "run" / "eval.csv").mkdir(parents=True)
    with pytest.raises(UserError, match=r"eval.csv cannot be written \("):
        _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar", "--out", str(tmp_path / "run")])
