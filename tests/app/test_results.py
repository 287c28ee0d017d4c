"""The result tables on the page: one row per paper with 'no answer', follow-ups with their technique, one filter
for the table and the filtered download, duplicates across formats."""

from __future__ import annotations

import io
import re

import pytest
from openpyxl import load_workbook

from mlpsych.answers import Answer
from mlpsych.app import results
from mlpsych.documents import Document
from mlpsych.pipeline import RunResult
from mlpsych.questions import parse_question_set

QS = parse_question_set({"questions": [
    {"id": "q1", "text": "Which methods?", "models": ["m1", "org/m2"]},
    {"id": "q2", "text": "Which software?", "models": ["m1"]},
    {"id": "q3", "text": "Which country?", "models": ["m1"]},
    {"id": "q4", "text": "What was __PLACEHOLDER__ for?", "models": ["m1"], "bridge_from": "q1"},
]}, "inline")


def _result() -> RunResult:
    a = Document(id="a", text="We used random forests in R to predict mood.", source_path="/up/a.txt")
    b = Document(id="b", text="We used BERT.", pages=[(0, 13)], source_path="/up/b.pdf")
    c = Document(id="c", text="", source_path="/up/c.pdf", status="ingest: not a PDF")
    answers = [
        Answer("a", "q1", "random forests", "extractive", ["/tmp/tiny/deberta-v2"], 0.9, 8, 22, None, a.text, final=True),
        Answer("a", "q2", "R", "extractive", ["m1"], 0.5, 26, 27, None, a.text, final=True),
        Answer("a", "q1", "forests", "extractive", ["m1"], 0.2, 15, 22, None, a.text, final=False),
        Answer("a", "q4", "to predict mood", "extractive", ["m1"], 0.00012345, 28, 43, None, a.text, final=True,
               bridge_entity="random forests"),
        Answer("b", "q1", "BERT", "extractive", ["m1", "org/m2"], 0.7, 8, 12, 1, b.text, ensemble=True, final=True),
    ]
    return RunResult(documents=[a, b, c], questions=QS, answers=answers,
                     errors={"b": ["q1 with m1: boom"], "c": ["ingest: not a PDF"]})


def test_results_table_names_the_technique_of_follow_ups():
    table = results.results_table(_result())
    assert list(table.columns) == results.RESULT_COLUMNS
    assert list(table["answer"]) == ["random forests", "R", "to predict mood", "BERT"]  # final answers only
    assert list(table["technique"]) == ["", "", "random forests", ""]
    assert table["question"].iloc[2] == "What was random forests for?"
    assert list(table["models"]) == ["deberta-v2", "m1", "m1", "m1+m2"]
    assert table["score"].iloc[2] == pytest.approx(0.0001234)  # kept with its precision, not rounded to 0.000


def test_evidence_card_shows_the_whole_sentence_and_page():
    table = results.results_table(_result())
    assert results.evidence_card(table.iloc[3].to_dict()) == (
        "**b**, Which methods?\n\n**BERT** (page 1)\n\n> We used BERT\\.")  # the "." escaped
    # a text file has no pages: none is made up (nor "nan", beside a PDF's answer in the same table)
    assert results.evidence_card(table.iloc[2].to_dict()) == (
        "**a**, What was random forests for?\n\n**to predict mood** (no page number)\n\n"
        "> We used random forests in R to predict mood\\.")


def test_one_filter_for_the_table_and_the_download():
    result = _result()
    table = results.results_table(result)
    everything = results.ResultFilter()
    assert not everything.active and len(results.filter_results(table, everything)) == 4
    by_question = results.ResultFilter(questions=("q1",))
    assert list(results.filter_results(table, by_question)["answer"]) == ["random forests", "BERT"]
    technique = results.ResultFilter(text="RANDOM forests", questions=("q4",))  # found in the technique too
    assert list(results.filter_results(table, technique)["answer"]) == ["to predict mood"]
    assert results.filter_results(table, results.ResultFilter(papers=("c",))).empty
    chosen = results.ResultFilter(papers=("a",), text="r")
    narrowed = results.filtered_result(result, chosen)
    assert [d.id for d in narrowed.documents] == ["a"]
    assert {a.text for a in narrowed.answers} == {"random forests", "R", "forests", "to predict mood"}
    book = load_workbook(io.BytesIO(results.download_bytes(narrowed, ".xlsx")))
    shown = results.filter_results(table, chosen)
    assert [r[0].value for r in book["answers"].iter_rows(min_row=2, max_col=1)] == list(shown["paper"])
    assert book["answers"].max_row - 1 == len(shown) == 3
    assert results.filtered_result(result, everything) is result


def _sheets(result: RunResult, chosen: results.ResultFilter) -> dict[str, list[tuple]]:
    """The filtered download's papers and answers sheets, header first."""
    book = load_workbook(io.BytesIO(results.download_bytes(results.filtered_result(result, chosen), ".xlsx")))
    return {name: list(book[name].iter_rows(values_only=True)) for name in ("papers", "answers")}


def test_a_follow_up_downloaded_alone_has_no_empty_column_of_the_question_it_follows():
    """Filtered to q4 ("What was X used for?"), the download's papers sheet had a q1 column, empty in every paper
    (q1 came along to order and phrase q4, its answers did not): read as "no method found". Its rows are as in
    the whole run's sheets, the technique (bridge_entity) included."""
    result = _result()
    alone = _sheets(result, results.ResultFilter(questions=("q4",)))
    whole = _sheets(result, results.ResultFilter())
    assert alone["papers"][:2] == [("paper_id", "source_file", "status", "q4", "text_notes"),
                                   ("a", "a.txt", "ok", "random forests: to predict mood", None)]
    assert alone["answers"][1:] == [r for r in whole["answers"][1:] if r[2] == "q4"]
    assert alone["answers"][1][alone["answers"][0].index("bridge_entity")] == "random forests"
    with_parent = _sheets(result, results.ResultFilter(questions=("q1", "q4")))
    assert with_parent["papers"][:2] == [("paper_id", "source_file", "status", "q1", "q4", "text_notes"),
                                         ("a", "a.txt", "ok", "random forests", "random forests: to predict mood",
                                          None)]
    narrowed = results.filtered_result(result, results.ResultFilter(questions=("q4",)))
    assert list(results.overview_table(narrowed).columns) == ["paper", "q4", "status"]  # the page's view alike


def test_overview_has_a_row_per_paper_and_says_no_answer():
    overview = results.overview_table(_result())
    assert list(overview.columns) == ["paper", "q1", "q2", "q3", "q4", "status"]
    rows = overview.set_index("paper").to_dict("index")
    assert rows["a"]["q1"] == "random forests" and rows["a"]["q4"] == "random forests: to predict mood"
    assert rows["a"]["q3"] == results.NO_ANSWER and rows["b"]["q2"] == results.NO_ANSWER
    assert rows["c"]["q1"] == results.NOT_READ and rows["c"]["status"] == "ingest: not a PDF"


def test_status_table_shows_problems_and_notes_per_paper():
    """The notes ingest made of a paper it read (pages without text) are shown beside its status."""
    result = _result()
    result.documents[1].meta["warnings"] = ["pages without text (images? OCR them to include them): 2"]
    status = results.status_table(result)
    assert status.to_dict("records")[:2] == [
        {"paper": "a", "source_file": "a.txt", "pages": None, "answers": 3, "status": "ok", "text_notes": ""},
        {"paper": "b", "source_file": "b.pdf", "pages": 1, "answers": 1, "status": "q1 with m1: boom",
         "text_notes": "pages without text (images? OCR them to include them): 2"}]


def test_duplicates_across_formats_are_named():
    docs = [Document(id="x", text="t", source_path="/up/X.pdf"), Document(id="x-2", text="t", source_path="/up/x.txt"),
            Document(id="y", text="t", source_path="/up/y.txt")]
    assert results.duplicate_names(docs) == [
        "X.pdf and x.txt share a name: they are read as x and x-2 (remove one if they are the same paper)"]
    assert results.duplicate_names(docs[2:]) == []


def test_download_bytes_are_the_exporters_files(tmp_path):
    result = _result()
    book = load_workbook(io.BytesIO(results.download_bytes(result, ".xlsx")))
    assert {"papers", "answers", "frequencies", "run"} <= set(book.sheetnames)
    assert book["answers"].max_row == 5  # the four final answers
    csv_text = results.download_bytes(result, ".csv").decode("utf-8")
    assert csv_text.splitlines()[0].startswith("paper_id,source_file,question_id")
    with pytest.raises(ValueError):
        results.download_bytes(result, ".ods")


def test_a_demo_run_says_so_in_the_file_name_and_first_in_the_run_sheet():
    from mlpsych.export import run_rows
    from mlpsych.models import DEMO_NOTE

    real, demo = _result(), _result()
    demo.info.demo_models = ["/tmp/tiny/deberta-v2"]
    assert results.download_name(real, ".xlsx") == "results.xlsx"
    assert results.download_name(demo, ".csv") == "results-DEMO-random-models.csv"
    assert results.download_name(demo, ".xlsx", filtered=True) == "results-filtered-DEMO-random-models.xlsx"
    assert run_rows(demo)[0] == ("NOTE", DEMO_NOTE) and all(k != "NOTE" for k, _ in run_rows(real))


# Sentences of real papers that a markdown renderer takes for markup (text.json: 16 of its 52 papers hold "*").
AS_READ = [
    "Regression Model 1 OPMi,j = a+ b*PMPi,j + th* firmsizei,j + i*industryk",
    "12. Results",
    "- Participants were compensated $40, then $60 (p < .05) ~5 min",
    "Code: [here](https://github.com/x/Aff_Eff_PPR) <b>raw</b> `x` # ~~struck~~ __bold__ **bold** 1) \\n",
    "ratio :red[warning] and :smile: > quoted | cell",
]


def test_paper_text_on_the_page_is_shown_as_read_not_as_markdown():
    """The evidence card and the review rendered a paper's text as markdown: asterisks became italics, a sentence
    "12. Results" a numbered list, a [link](...) a link."""
    import html

    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark").enable("strikethrough")
    for text in AS_READ:
        shown = html.unescape(re.sub(r"<[^>]+>", "", render.render(results.literal(text)))).strip()
        assert shown == text
        assert not re.search(r"(?<!\\)[$:]", results.literal(text))  # Streamlit's math and shortcodes: escaped too
    card = results.evidence_card({"paper": "a", "question": "Which methods?", "answer": AS_READ[0][-10:],
                                  "page": 3, "evidence": AS_READ[1]})
    shown = html.unescape(re.sub(r"<[^>]+>", "", render.render(card)))
    assert AS_READ[0][-10:] + " (page 3)" in shown and "\n" + AS_READ[1] + "\n" in shown


def test_a_run_past_excels_rows_offers_the_csv_and_says_why_there_is_no_workbook(monkeypatch):
    """The page's downloads of a run whose answers pass Excel's rows a sheet (here 2): the CSV, and a line saying
    why there is no XLSX (the page stopped with the exporter's error)."""
    from mlpsych import export

    monkeypatch.setattr(export, "EXCEL_ROW_LIMIT", 2, raising=False)
    files, problems = results.downloads(_result())
    assert list(files) == [".csv"] and b"random forests" in files[".csv"]
    assert len(problems) == 1 and problems[0].startswith("No XLSX download: as a workbook its sheets would have ")
    assert "results.xlsx" not in problems[0] and ".csv" in problems[0]
