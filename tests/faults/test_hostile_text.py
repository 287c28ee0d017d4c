"""Hostile text: surrogates (paired and lone), math letters, controls, non-characters, marks, a 1 MB line, a paper
of symbols, in every format ingest reads. Each paper is read, answered and written without a traceback; no text
that cannot be encoded as UTF-8 gets past ingest (issue 13: a preprint's 𝐾 came out of pdfium as two surrogates
and crashed ``mlpsych ingest`` and ``mlpsych run``)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest
from openpyxl import load_workbook

from mlpsych.cli import main
from mlpsych.dev.synth import MATH_FONT, math_italic_paper, render_pdf
from mlpsych.documents import Document
from mlpsych.ingest import load_documents, tika
from mlpsych.ingest.textnorm import normalize_text

from .conftest import RUN_OPTIONS
from .hostile_text import BODY, FORBIDDEN, hostile_paragraphs, jsonl_record, write_corpus

FONT_FILES = [MATH_FONT.parent / name for name in ("DejaVuMathTeXGyre.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf")]
FONTS = all(path.is_file() for path in FONT_FILES)  # without them the corpus has no PDFs and the PDF tests skip
NO_FONTS = f"DejaVu fonts missing (fonts-dejavu: {', '.join(str(p) for p in FONT_FILES)}): no math-italic PDF"


@pytest.fixture(autouse=True, scope="module")
def _no_tika() -> Iterator[None]:
    """Tika only from the repository's jar, as in CI: a jar given in the shell is out of this module's runs too (the
    module's run is made once, before any test's own fixtures, so a test-scoped removal came too late for it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TIKA_APP_JAR", raising=False)
        patch.delenv("TIKA_SERVER_ENDPOINT", raising=False)
        yield


def assert_safe(document: Document) -> None:
    """What every downstream stage relies on: UTF-8-encodable NFC text, writable as JSON, hashable."""
    bad = FORBIDDEN.findall(document.text)
    assert not bad, (document.id, bad[:5])
    assert unicodedata.is_normalized("NFC", document.text), document.id
    json.dumps(document.to_dict(), ensure_ascii=False).encode("utf-8")
    assert len(document.sha256) == 64


def raw_pdfium_text(path: Path) -> str:
    """The first page as PDFium's per-character API gives it (what the pdfium backend reads)."""
    document = pdfium.PdfDocument(str(path))
    try:
        textpage = document[0].get_textpage()
        return "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage.raw, i)) for i in range(textpage.count_chars()))
    finally:
        document.close()


@pytest.fixture(scope="module")
def math_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not FONTS:
        pytest.skip(NO_FONTS)
    path = tmp_path_factory.mktemp("math") / "math-italic.pdf"
    render_pdf(math_italic_paper(), path)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The corpus without its HTML (that needs Tika: see the Tika test); PDFs when the fonts are there."""
    return write_corpus(tmp_path_factory.mktemp("hostile"), html_file=False, pdfs=FONTS)


@pytest.fixture(scope="module")
def ingested(corpus: dict[str, Path]) -> dict[str, Document]:
    documents = load_documents(corpus["hostile-txt.txt"].parent, pdf_backend="pdfium", progress=False)
    return {d.id: d for d in documents}


# -- the PDF of the issue ------------------------------------------------------------------------------------


def test_math_italic_pdf_comes_out_of_pdfium_as_surrogates_and_in_as_plain_letters(math_pdf: Path) -> None:
    assert "\ud835\udc3e = 500" in raw_pdfium_text(math_pdf)  # the user's bug, reproduced by the test PDF
    (document,) = load_documents(math_pdf, pdf_backend="pdfium", progress=False)
    assert document.ok, document.status
    assert_safe(document)
    assert "number of trees K = 500" in document.text and "the penalty λ was chosen" in document.text
    report = document.meta["cleaning"]["textnorm"]
    assert report["surrogate_pairs"] == report["math_letters"] >= 8
    assert report["math_mapped"]["U+1D43E"] == "K"


# -- every format ------------------------------------------------------------------------------------------


ALL_KINDS = ("surrogate_pairs", "lone_surrogates", "noncharacters", "controls", "math_letters", "nfc_regions")
# paper id -> what its textnorm report must count (JSON joins surrogate pairs itself when it decodes escapes)
EXPECTED = {
    "hostile-txt": ALL_KINDS,
    "hostile-jsonl\ufffd": ALL_KINDS[1:],
    "hostile-textjson": ALL_KINDS[1:],
    "long-line": ("surrogate_pairs", "controls", "math_letters", "nfc_regions"),
}
if FONTS:
    EXPECTED["hostile-pdf"] = ALL_KINDS  # PDFium gives every astral character as two surrogates


def test_every_format_of_the_hostile_paper_is_read_clean(ingested: dict[str, Document]) -> None:
    for document in ingested.values():
        assert document.ok, (document.id, document.status)
        assert_safe(document)
    for paper_id, kinds in EXPECTED.items():
        report = ingested[paper_id].meta["cleaning"]["textnorm"]
        assert all(report.get(kind) for kind in kinds), (paper_id, report)
        assert report["math_mapped"]["U+1D43E"] == "K"
        text = ingested[paper_id].text
        if paper_id == "long-line":
            continue
        assert "their work K = 500. We trained random forests" in text, paper_id
        assert "their work K λ N 5." in text and "their work x\ufffdy." in text, paper_id  # lost halves stay visible
        assert "their work ab." in text and "é ä ñ" in text and "\U0001f600" in text, paper_id


def test_noncharacters_become_visible_replacements(ingested: dict[str, Document]) -> None:
    for paper_id in ("hostile-txt", "hostile-jsonl\ufffd", "hostile-textjson"):
        assert "their work \ufffd\ufffd\ufffd\ufffd." in ingested[paper_id].text, paper_id
        assert ingested[paper_id].meta["cleaning"]["textnorm"]["noncharacters"] == 4


def test_labels_from_a_jsonl_are_made_safe(ingested: dict[str, Document]) -> None:
    document = ingested["hostile-jsonl\ufffd"]
    assert document.source_path == "export\ufffd.pdf"
    assert document.meta["note"] == "hand-edited \ufffd"


def test_a_file_name_that_is_not_utf8_is_a_safe_label(tmp_path: Path) -> None:
    """A zip made on Windows, unpacked on Linux: Python gives the name's stray byte as a lone surrogate."""
    path = Path(os.fsdecode(bytes(tmp_path) + b"/Caf\xe9 study.txt"))
    path.write_text(BODY, encoding="utf-8")
    (document,) = load_documents(tmp_path, progress=False)
    assert document.ok and document.id == "Caf_study" and Path(document.source_path).name == "Caf\ufffd study.txt"
    assert_safe(document)


def test_jsonl_page_ranges_follow_the_normalization(ingested: dict[str, Document]) -> None:
    record = jsonl_record()
    document = ingested["hostile-jsonl\ufffd"]
    assert len(document.pages) == 2 and document.pages[-1][1] == len(document.text)
    for (start, end), (new_start, new_end) in zip(record["pages"], document.pages, strict=True):
        assert document.text[new_start:new_end] == normalize_text(record["text"][start:end])
    assert document.page_at(document.text.index(normalize_text(hostile_paragraphs()[2])[:60])) == 2


def test_symbols_only_and_one_megabyte_line(ingested: dict[str, Document]) -> None:
    symbols = ingested["symbols"]
    assert symbols.ok and "∑ ∫ ≈" in symbols.text and not re.search(r"[A-Za-z0-9]", symbols.text)
    long_line = ingested["long-line"]
    assert len(long_line.text) > 800_000 and long_line.text.count(BODY) == 2
    assert "burnoutKforestscareté" in long_line.text


def test_ingest_writes_utf8_jsonl_that_reads_back_unchanged(corpus, ingested, tmp_path, capsys) -> None:
    out = tmp_path / "texts.jsonl"
    assert main(["ingest", str(corpus["hostile-txt.txt"].parent), "--out", str(out), "--quiet",
                 "--pdf-backend", "pdfium"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    lines = out.read_bytes().decode("utf-8").splitlines()  # strict UTF-8
    assert {json.loads(line)["id"] for line in lines} == set(ingested)
    again = {d.id: d for d in load_documents(out, progress=False)}
    for paper_id, document in ingested.items():
        assert (again[paper_id].text, again[paper_id].pages) == (document.text, document.pages)
        assert again[paper_id].meta["cleaning"] == document.meta["cleaning"]  # nothing left to normalize


# -- through the whole program -----------------------------------------------------------------------------


def papers_sheet(path: Path) -> dict[str, tuple]:
    return {row[0]: row for row in load_workbook(path)["papers"].iter_rows(min_row=2, values_only=True)}


@pytest.fixture(scope="module")
def hostile_run(fast_questions: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`mlpsych run` on the whole corpus, HTML included (Tika reads it when the jar is there), into XLSX, CSV and
    JSONL (one cache: the second and third runs read every result from it)."""
    folder = tmp_path_factory.mktemp("hostile-run")
    files = write_corpus(folder / "papers", pdfs=FONTS)
    outputs = {suffix: folder / f"out.{suffix}" for suffix in ("xlsx", "csv", "jsonl")}
    for out in outputs.values():
        code = main(["run", str(folder / "papers"), "--questions", str(fast_questions), "--out", str(out),
                     "--cache", str(folder / "cache"), "--pdf-backend", "pdfium", *RUN_OPTIONS])
        assert code == 0
    return {**outputs, "papers": folder / "papers", "text.json": files["text.json"], "folder": folder}


@pytest.mark.slow
def test_hostile_corpus_through_run_and_every_output_opens(hostile_run) -> None:
    papers = papers_sheet(hostile_run["xlsx"])
    documents = {d.id: d for d in load_documents(hostile_run["papers"], pdf_backend="pdfium", progress=False)}
    assert set(papers) == set(documents)
    for paper_id, row in papers.items():
        assert row[2] == documents[paper_id].status, row
        assert row[2] == "ok" or (paper_id == "hostile-html" and "Tika" in row[2]), row
    answered = {row[0] for row in load_workbook(hostile_run["xlsx"])["answers"].iter_rows(min_row=2, values_only=True)}
    assert {"hostile-txt", "hostile-jsonl\ufffd", "hostile-textjson", "long-line"} <= answered
    with hostile_run["csv"].open(encoding="utf-8", newline="") as handle:  # csv's default field size limit
        assert {row["paper_id"] for row in csv.DictReader(handle)} == answered
    records = [json.loads(line) for line in hostile_run["jsonl"].read_bytes().decode("utf-8").splitlines()]
    assert {r["paper_id"] for r in records} >= answered
    for record in records:
        assert not FORBIDDEN.search(record["answer"] + record["evidence"]), record


@pytest.mark.slow
def test_no_answer_is_longer_than_a_spreadsheet_cell(hostile_run) -> None:
    records = [json.loads(line) for line in hostile_run["jsonl"].read_text(encoding="utf-8").splitlines()]
    assert max(len(r["answer"]) for r in records) <= 32_767


@pytest.mark.slow
def test_eval_reads_hostile_gold_and_texts(hostile_run, capsys) -> None:
    gold = hostile_run["folder"] / "gold.json"
    gold.write_text(json.dumps({"q1": {"hostile-textjson": [{"text": "random forests"}],
                                       "hostile-jsonl\ud835": [{"text": "random forests \U0001d43e"}]}}),
                    encoding="ascii")  # a lone surrogate in a paper id, a math letter in an answer
    out = hostile_run["folder"] / "eval.csv"
    code = main(["eval", "--gold", str(gold), "--pred", str(hostile_run["jsonl"]), "--texts",
                 str(hostile_run["text.json"]), "--no-similar", "--out", str(out)])
    assert code == 0 and "Traceback" not in capsys.readouterr().err
    rows = list(csv.DictReader(out.read_bytes().decode("utf-8").splitlines()))
    assert rows and {row["n"] for row in rows} >= {"2"}  # both papers scored: the ids matched after normalization


@pytest.mark.slow
def test_math_italic_pdf_and_two_normal_papers_are_all_answered(math_pdf, examples_dir, fast_questions,
                                                                tmp_path) -> None:
    folder = tmp_path / "papers"
    folder.mkdir()
    shutil.copy(math_pdf, folder / "math-italic.pdf")
    normal = sorted((examples_dir / "papers").glob("*.txt"))[:2]
    for path in normal:
        shutil.copy(path, folder / path.name)
    out = tmp_path / "out.xlsx"
    assert main(["run", str(folder), "--questions", str(fast_questions), "--out", str(out),
                 "--cache", str(tmp_path / "cache"), "--pdf-backend", "pdfium", *RUN_OPTIONS]) == 0
    papers = papers_sheet(out)
    assert set(papers) == {"math-italic", *(p.stem for p in normal)}
    assert all(row[2] == "ok" for row in papers.values()), papers
    answered = {row[0] for row in load_workbook(out)["answers"].iter_rows(min_row=2, values_only=True)}
    assert answered == set(papers)


@pytest.mark.slow
def test_tika_reads_the_hostile_html_and_pdfs(tmp_path) -> None:
    reason = tika.unusable_reason()
    if reason is not None:
        pytest.skip(f"{reason} (.ci/fetch_tika.sh puts the jar at .tika/tika-app.jar)")
    files = write_corpus(tmp_path, pdfs=FONTS)
    paths = [files["hostile-html.html"]] + ([files["hostile-pdf.pdf"], files["math-italic.pdf"]] if FONTS else [])
    documents = {Path(d.source_path).name: d for d in load_documents(paths, pdf_backend="tika", progress=False)}
    for name, document in documents.items():
        assert document.ok and document.meta["backend"] == "tika-app", (name, document.status)
        assert_safe(document)
        assert "random forests" in document.text
    assert "their work K λ N 5." in documents["hostile-html.html"].text  # the CESU-8 pair: Tika's own U+FFFDs
    if FONTS:
        assert "number of trees K = 500" in documents["math-italic.pdf"].text
        assert documents["math-italic.pdf"].meta["cleaning"]["textnorm"]["math_mapped"]["U+1D43E"] == "K"
