"""Which papers `mlpsych eval` scores and how, as the paper's released evaluation does (hand-computed cases).

1. Every paper of the corpus that the gold covers is a row; with gold answers and no prediction it scores 0.
2. Empty gold (q2 papers without software): EM/Ment/SMat 1 if nothing is predicted, else 0; F1 left out.
3. A paper of the corpus missing from the run's output is an error, unless the papers sheet says it failed.
4. A footnote under each table states the rules with the counts.
5. Bootstrap resamples skip the undefined F1s.
"""

from __future__ import annotations

import csv
import io
import math

import pytest

from mlpsych.errors import UserError
from mlpsych.evaluation import evaluate as ev

from .test_evaluate import EXPECTED, GOLD, RAN, ROWS, TEXTS, A, B, _by_key, _export, _run_cli, _write_dataset


def _papers_sheet(status: dict[str, str]) -> list[dict]:
    """The run's papers sheet, as `load_run_papers` reads it from an XLSX."""
    return [{"paper_id": paper, "source_file": f"{paper}.txt", "status": status.get(paper, "ok")} for paper in TEXTS]


# The corpus TEXTS holds p4 (gold q1 ["paper"], absent from q2 so q2 gold = []); ROWS have nothing for p4.
# The run read p4 and found nothing (papers sheet status "ok"): p4 is a fourth row of each q1 and q2 table.
# q1 (best): p4 scores 0 everywhere, so each mean over p1-p3 (test_evaluate.EXPECTED) becomes sum/4:
#   A: F1 1.4/3 -> 1.4/4 (down by exactly 1.4/12), EM 1/3 -> 1/4, Ment 1.5/3 -> 1.5/4
#   B: F1 (.5+1+2/3)/4, EM 1.5/4, Ment 1.5/4; combined: F1 (.9+1+2/3)/4, EM 1.5/4, Ment 2/4
#   papers with gold and no prediction: A p3, p4 (2); B p4 (1); combined p4 (1)
# q2: p4 has empty gold and nothing predicted -> EM, Ment 1, F1 left out:
#   A: EM (.5 + 0 + 1 + 1)/4 = .625, F1 .5 (p1 only); B: EM (.5 + 1 + 0 + 1)/4 = .625, F1 .5; combined: 1, 1
Q1_WITH_P4 = {
    ("q1", A): {"F1": 1.4 / 4, "EMat": 1 / 4, "Ment": 1.5 / 4, "n": 4},
    ("q1", B): {"F1": (0.5 + 1 + 2 / 3) / 4, "EMat": 1.5 / 4, "Ment": 1.5 / 4, "n": 4},
    ("q1", "combined"): {"F1": (0.9 + 1 + 2 / 3) / 4, "EMat": 1.5 / 4, "Ment": 0.5, "n": 4},
}
Q2_WITH_P4 = {
    ("q2", A): {"F1": 0.5, "EMat": 0.625, "Ment": 0.625, "n": 4},
    ("q2", B): {"F1": 0.5, "EMat": 0.625, "Ment": 0.625, "n": 4},
    ("q2", "combined"): {"F1": 1.0, "EMat": 1.0, "Ment": 1.0, "n": 4},
}
# The run failed on p4 (status not "ok", no answer at all): q1 as above; in q2 the failed paper scores 0 too,
# though its gold is empty (it did not answer "nothing"): A EM (.5+0+1+0)/4, B (.5+1+0+0)/4, combined 3/4.
Q2_P4_FAILED = {
    ("q2", A): {"F1": 0.5, "EMat": 0.375, "Ment": 0.375, "n": 4},
    ("q2", B): {"F1": 0.5, "EMat": 0.375, "Ment": 0.375, "n": 4},
    ("q2", "combined"): {"F1": 1.0, "EMat": 0.75, "Ment": 0.75, "n": 4},
}


def _check(table, expected):
    rows = _by_key(table)
    for key, values in expected.items():
        for metric, value in values.items():
            assert rows[key].metrics[metric] == pytest.approx(value), (key, metric)
    return rows


def test_paper_without_predictions_scores_zero_and_pulls_the_mean_down():
    gold = ev.gold_from_dict(GOLD)
    table = ev.evaluate(gold, ROWS, texts=TEXTS, papers=_papers_sheet({}))
    rows = _check(table, {**Q1_WITH_P4, **Q2_WITH_P4})
    before = _by_key(ev.evaluate(gold, ROWS, texts=RAN))[("q1", A)].metrics["F1"]
    assert before == pytest.approx(1.4 / 3) and before - rows[("q1", A)].metrics["F1"] == pytest.approx(1.4 / 12)
    assert [rows[("q1", m)].unanswered for m in (A, B, "combined")] == [2, 1, 1]
    assert rows[("q2", A)].empty_gold == 3 and rows[("q1", A)].failed == 0
    # q3 and q4 are annotated for one paper each: p4 is not theirs
    assert rows[("q3", A)].metrics["n"] == 1 and rows[("q4", A)].metrics["n"] == 1


def test_paper_mentioned_without_answer_to_a_question_scores_zero_without_texts():
    # no texts: p4 is scored because the prediction file mentions it (an answer to q3 only)
    rows = ROWS + [{**ROWS[5], "paper_id": "p4", "source_file": "p4.txt"}]
    table = _by_key(ev.evaluate(ev.gold_from_dict(GOLD), rows, questions=["q1"]))
    assert table[("q1", A)].metrics["F1"] == pytest.approx(1.4 / 4)
    assert table[("q1", A)].left_out == 0


def test_empty_gold_em_mentions_one_or_zero_and_f1_over_the_other_papers():
    gold = {"q1": {"a": ["SVM"], "b": ["LDA"], "c": ["BERT"]}, "q2": {"a": ["SPSS"]}}  # q2 gold: b = c = []
    preds = [
        {"paper_id": "a", "question_id": "q2", "answer": "SPSS", "models": ["m"]},
        {"paper_id": "b", "question_id": "q2", "answer": "Python", "models": ["m"]},  # empty gold, predicted
        {"paper_id": "c", "question_id": "q1", "answer": "BERT", "models": ["m"]},  # c: nothing for q2
    ]

    def similarity(x: str, y: str) -> float:
        return 1.0

    (row,) = ev.evaluate(gold, preds, questions=["q2"], similarity=similarity)
    # a: all 1; b: EM, Ment, SMat 0, F1 undefined; c: EM, Ment, SMat 1, F1 undefined
    assert row.metrics["F1"] == pytest.approx(1.0)  # over a alone; counting b and c gave (1 + 0 + 1)/3
    assert row.metrics["EMat"] == pytest.approx(2 / 3)
    assert row.metrics["Ment"] == pytest.approx(2 / 3)
    assert row.metrics["SMat"] == pytest.approx(2 / 3)
    assert row.metrics["n"] == 3 and row.empty_gold == 2
    # micro P/R/F1: "Python" on b is a false positive; SPSS the one true positive of 1 gold span
    assert (row.metrics["P"], row.metrics["R"]) == (pytest.approx(0.5), pytest.approx(1.0))
    only_empty = ev.evaluate(gold, preds[1:], questions=["q2"])[0]
    assert math.isnan(only_empty.metrics["F1"]) and only_empty.metrics["EMat"] == pytest.approx(0.5)
    assert "| – |" in ev.to_markdown([only_empty], ("F1", "EMat"))


def test_paper_missing_from_the_run_is_an_error():
    gold = ev.gold_from_dict(GOLD)
    with pytest.raises(ev.EvalInputError, match=r"1 paper\(s\) of the corpus with gold are missing.*: p4\."):
        ev.evaluate(gold, ROWS, texts=TEXTS)
    sheet = [r for r in _papers_sheet({}) if r["paper_id"] != "p4"]  # the papers sheet does not list p4 either
    with pytest.raises(ev.EvalInputError, match="p4"):
        ev.evaluate(gold, ROWS, texts=TEXTS, papers=sheet)
    # a paper without gold (p9) or a question that does not cover the paper is no error
    ev.evaluate(gold, [r for r in ROWS if r["paper_id"] != "p9"], questions=["q3", "q4"], texts=TEXTS)


def test_missing_paper_marked_failed_scores_zero():
    table = ev.evaluate(ev.gold_from_dict(GOLD), ROWS, texts=TEXTS,
                        papers=_papers_sheet({"p4": "ingest: not a PDF"}))
    rows = _check(table, {**Q1_WITH_P4, **Q2_P4_FAILED})
    assert rows[("q1", A)].failed == 1 and rows[("q2", B)].failed == 1 and rows[("q3", A)].failed == 0
    markdown = ev.to_markdown(table)
    assert "1 paper(s) the run failed on (papers sheet status) score 0 on every metric." in markdown


def test_footnote_states_the_rules_with_counts():
    table = ev.evaluate(ev.gold_from_dict(GOLD), ROWS, texts=TEXTS, papers=_papers_sheet({}))
    markdown = ev.to_markdown(table)
    q1 = markdown.split("### q2")[0]
    assert f"n = 4 papers. Papers with gold answers and no prediction score 0 ({A} 2, {B} 1, combined 1)." in q1
    assert "Empty gold" not in q1
    q2 = markdown.split("### q2")[1].split("### q3")[0]
    assert ("Empty gold (3 papers): EM, Ment and SMat 1 if nothing is predicted, else 0; F1 left out (F1 mean "
            "over the other 1).") in q2
    left_out = ev.to_markdown(ev.evaluate(ev.gold_from_dict(GOLD), ROWS, questions=["q1"]))
    assert "1 gold paper(s) not mentioned in the predictions are left out" in left_out


def test_bootstrap_skips_undefined_f1_in_each_resample():
    table = _by_key(ev.evaluate(ev.gold_from_dict(GOLD), ROWS, questions=["q2"], bootstrap=200, seed=3))
    # A: F1 is defined for p1 alone (.5): every resample holding p1 has F1 .5, the others none
    assert table[("q2", A)].intervals["F1"] == (pytest.approx(0.5), pytest.approx(0.5))
    lo, hi = table[("q2", A)].intervals["EMat"]  # EM per paper .5, 0, 1
    assert lo < 0.5 < hi


def _cli(tmp_path, pred, corpus):
    texts, gold, _ = _write_dataset(tmp_path, corpus)
    out = tmp_path / "table.csv"
    code = _run_cli(["eval", "--texts", str(texts), "--gold", str(gold), "--pred", str(pred), "--no-similar",
                     "--questions", "q1,q2", "--out", str(out)])
    return code, {(r["question"], r["model"]): r for r in csv.DictReader(io.StringIO(out.read_text()))}


def test_cli_missing_paper_is_a_user_error(tmp_path):
    pred = _export(tmp_path, ".jsonl", corpus=TEXTS)  # a JSONL records no papers: p4 (no answer) is missing
    with pytest.raises(UserError, match="missing from the run's output: p4"):
        _cli(tmp_path, pred, TEXTS)


@pytest.mark.parametrize("status", ["ok", "failed"])
def test_cli_reads_the_papers_sheet(tmp_path, capsys, status):
    errors = {"p4": ["ingest: cannot read p4.pdf"]} if status == "failed" else {}
    pred = _export(tmp_path, ".xlsx", corpus=TEXTS, errors=errors)
    code, found = _cli(tmp_path, pred, TEXTS)
    assert code == 0
    expected = {**Q1_WITH_P4, **(Q2_P4_FAILED if status == "failed" else Q2_WITH_P4)}
    for key, values in expected.items():
        for metric, value in values.items():
            assert float(found[key][metric]) == pytest.approx(value, abs=1e-5), (key, metric)
    printed = capsys.readouterr().out
    assert "n = 4 papers" in printed and ("the run failed on" in printed) == (status == "failed")


def test_cli_run_on_part_of_the_corpus_scores_as_before(tmp_path):
    pred = _export(tmp_path, ".xlsx")  # the run's corpus RAN: p4 never run, and not in the texts
    code, found = _cli(tmp_path, pred, RAN)
    assert code == 0
    assert float(found[("q1", A)]["F1"]) == pytest.approx(EXPECTED[("q1", A)]["F1"], abs=1e-5)


@pytest.mark.parametrize("with_texts", [False, True])
def test_gold_keyed_by_file_names_is_said_to_name_other_papers(tmp_path, with_texts):
    """Gold keyed "p1.pdf" against a run of "p1": every paper was left out and the command said "no answers to score",
    though the run had answers. It now says the ids differ, with some of each side."""
    import json

    _, _, pred = _write_dataset(tmp_path)
    gold = tmp_path / "by-file-name.json"
    gold.write_text(json.dumps({q: {f"{p}.pdf": spans for p, spans in papers.items()} for q, papers in GOLD.items()}),
                    encoding="utf-8")
    texts = ["--texts", str(_write_dataset(tmp_path)[0])] if with_texts else []
    with pytest.raises(UserError) as raised:
        _run_cli(["eval", "--gold", str(gold), "--pred", str(pred), "--no-similar", *texts])
    assert str(raised.value).startswith("no paper of the gold is in the run's output")
    assert "'p1.pdf'" in str(raised.value) and "'p1'" in str(raised.value)
