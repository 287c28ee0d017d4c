"""`mlpsych run --keep-coding CODED`: a rerun's sheet holds the coding so far, coded papers are not read again."""

from __future__ import annotations

import csv
import importlib.util
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from openpyxl import Workbook, load_workbook

from mlpsych.cli import main
from mlpsych.coding.coded import coding_from_sheets
from mlpsych.evaluation.agree import read_codings
from mlpsych.evaluation.evaluate import read_sheet
from mlpsych.ingest import load_documents
from mlpsych.marks import is_final
from mlpsych.questions import load_question_set

FULL, PART, FRESH, GONE = "burnout-survey-text", "moral-language-speeches", "online-course-dropout", \
    "social-media-wellbeing"
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray is not installed: pip install 'mlpsych[scale]'")
ASKED = ("q1", "q2", "q3")  # the second run's questions: q4 is coded, and not asked
KEPT_COLUMNS = ("paper_id", "question_id", "answer", "stage", "models", "final", "confidence", "start", "end", "page",
                "evidence", "bridge_entity", "correct", "corrected_answer", "notes", "correct_2")


def run_cli(*args, cap: int = 2) -> int:
    return main(["run", *map(str, args), "--no-progress", "--max-length", "256", "--stride", "64",
                 "--max-sub-questions", str(cap)])


@pytest.fixture(scope="module")
def first(examples_dir, tiny_questions, tmp_path_factory) -> tuple[Path, Path]:
    """A first run's workbook on the example papers, and its cache."""
    folder = tmp_path_factory.mktemp("first")
    out, cache = folder / "results.xlsx", folder / "cache"
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", out, "--cache", cache) == 0
    return out, cache


@pytest.fixture
def read(monkeypatch) -> list[str]:
    """The ids of the papers the run gives its engine to read, local or Ray."""
    from mlpsych.engines.local import LocalEngine

    ids: list[str] = []
    engines = [LocalEngine]
    if importlib.util.find_spec("ray") is not None:
        from mlpsych.engines.ray_engine import RayEngine

        engines.append(RayEngine)
    for engine in engines:
        def spy(self, questions, settings, documents, *args, engine_run=engine.run, **kwargs):
            ids.extend(d.id for d in documents)
            return engine_run(self, questions, settings, documents, *args, **kwargs)

        monkeypatch.setattr(engine, "run", spy)
    return ids


@dataclass
class Sheet:
    """A run's answers sheet open for coding: its rows by (paper, question), and cells to put."""

    book: Workbook
    column: dict[str, int]
    rows: dict[tuple[str, str], list[int]]

    @classmethod
    def open(cls, sheet: Path) -> Sheet:
        book = load_workbook(sheet)
        answers = book["answers"]
        header = [c.value for c in answers[1]] + ["correct_2"]
        answers.cell(row=1, column=len(header), value="correct_2")
        rows: dict[tuple[str, str], list[int]] = {}
        for number in range(2, answers.max_row + 1):
            key = (answers.cell(number, header.index("paper_id") + 1).value,
                   answers.cell(number, header.index("question_id") + 1).value)
            rows.setdefault(key, []).append(number)
        return cls(book, {name: i + 1 for i, name in enumerate(header)}, rows)

    def put(self, row: int, **cells) -> None:
        for name, value in cells.items():
            self.book["answers"].cell(row=row, column=self.column[name], value=value)

    def added(self) -> int:
        return self.book["answers"].max_row + 1

    def mark(self, paper: str, questions: tuple[str, ...]) -> None:
        """These questions of ``paper`` coded: one row marked, or one added where the run had none."""
        for question in questions:
            if self.rows.get((paper, question)):
                self.put(self.rows[(paper, question)][0], correct="yes")
            else:
                self.put(self.added(), paper_id=paper, question_id=question, answer="survey", stage="coder",
                         final=True, correct="yes")


@pytest.fixture
def units(monkeypatch) -> dict[str, set[tuple[str, str]]]:
    """The (paper, question) pairs the local engine's stages are given: to read ("read"; "select", the cascade's
    small reader), and to merge, normalize and score ("answered")."""
    from mlpsych.pipeline import read as reading
    from mlpsych.pipeline.normalize import NormalizeStage

    given: dict[str, set[tuple[str, str]]] = {"select": set(), "read": set(), "answered": set()}

    def read_with(model, units, choose, stage, level, ctx, read_with=reading.read_with):
        given[stage].update((u.doc.id, u.question.id) for u in units)
        return read_with(model, units, choose, stage, level, ctx)

    def normalize(self, level, ctx, stage_run=NormalizeStage.run):
        given["answered"].update((item.unit.doc.id, item.unit.question.id) for item in level.answered)
        stage_run(self, level, ctx)

    monkeypatch.setattr(reading, "read_with", read_with)
    monkeypatch.setattr(NormalizeStage, "run", normalize)
    return given


def code(sheet: Path, coded: Path) -> None:
    """A coder's work on a first run's sheet: every question of FULL coded (one row marked, or one added where the
    run had none); in PART a q1 answer marked wrong, another corrected, a q2 answer added, q4 marked (q3 left);
    a q1 answer of GONE marked; a second coder's column with one mark."""
    coding = Sheet.open(sheet)
    rows, put = coding.rows, coding.put
    coding.mark(FULL, ("q1", "q2", "q3", "q4"))
    part_q1 = rows[(PART, "q1")]
    put(part_q1[0], correct="no", notes="not a technique", correct_2="no")
    if len(part_q1) > 1:
        put(part_q1[1], corrected_answer="moral foundations")
    put(coding.added(), paper_id=PART, question_id="q2", answer="speeches", stage="coder", final=True,
        ensemble=False, correct="yes", notes="added by the coder")
    put(rows[(PART, "q4")][0] if rows.get((PART, "q4")) else coding.added(), paper_id=PART, question_id="q4",
        correct="yes")
    put(rows[(GONE, "q1")][0], correct="yes")
    coding.book.save(coded)


@dataclass(frozen=True)
class Techniques:
    """A coder's q1 of a paper as q4 should ask about it: the answer accepted, the correction, the one added."""

    accepted: str
    corrected: str
    added: str


def code_techniques(sheet: Path, coded: Path, paper: str) -> Techniques:
    """A coder's coding of ``paper``'s q1 in ``sheet``, saved as ``coded``: of its final answers the first marked
    wrong, the second corrected (unmarked, as the review view writes a correction), the third accepted, every other
    marked wrong, and a technique added; its q4 left uncoded."""
    rows = [r for r in read_sheet(sheet, "answers") if r["paper_id"] == paper and r["question_id"] == "q1"
            and is_final(r)]
    assert len(rows) >= 3, "the tiny readers give a paper many q1 answers"
    book = load_workbook(sheet)
    answers = book["answers"]
    column = {c.value: c.column for c in answers[1]}

    def put(row: int, **cells) -> None:
        for name, value in cells.items():
            answers.cell(row=row, column=column[name], value=value)

    techniques = Techniques(accepted=rows[2]["answer"], corrected="moral foundations dictionary",
                            added="word embeddings")
    for row in rows:
        put(row["_row"], correct="no")
    put(rows[1]["_row"], correct=None, corrected_answer=techniques.corrected)
    put(rows[2]["_row"], correct="yes")
    put(answers.max_row + 1, paper_id=paper, question_id="q1", answer=techniques.added, stage="coder", final=True,
        correct="yes")
    book.save(coded)
    return techniques


def projection(rows: list[dict], pairs: set[tuple[str, str]]) -> Counter:
    """The rows of these (paper, question) pairs, as the columns a kept row keeps."""
    return Counter(tuple(str(r.get(c)) if r.get(c) not in (None, "") else "" for c in KEPT_COLUMNS)
                   for r in rows if (r["paper_id"], r["question_id"]) in pairs)


def judged(sheet: Path) -> Counter:
    """The answers `mlpsych agree` finds judged: question, stage and each coder's mark."""
    return Counter((c.question, c.stage, tuple(sorted(c.marks.items()))) for c in read_codings(sheet)[0]
                   if any(m is not None for m in c.marks.values()))


def pairs_of(rows: list[dict], papers: set[str], questions: tuple[str, ...]) -> set[tuple[str, str]]:
    return {(r["paper_id"], r["question_id"]) for r in rows
            if r["paper_id"] in papers and r["question_id"] in questions}


@pytest.mark.slow
def test_a_rerun_keeps_the_coding_and_reads_only_what_is_not_coded(first, examples_dir, tiny_questions, tmp_path,
                                                                    capsys, read):
    sheet, cache = first
    coded = tmp_path / "coded.xlsx"
    code(sheet, coded)
    papers = tmp_path / "papers"  # the folder of the second round: GONE is no longer in it
    papers.mkdir()
    for paper in (FULL, PART, FRESH):
        shutil.copy(examples_dir / "papers" / f"{paper}.txt", papers)
    capsys.readouterr()
    out = tmp_path / "round-2.xlsx"
    assert run_cli(papers, "--questions", tiny_questions, "--only", ",".join(ASKED), "--out", out, "--cache", cache,
                   "--keep-coding", coded) == 0
    summary = capsys.readouterr().out
    assert sorted(read) == sorted([PART, FRESH])  # every question of FULL is coded: FULL was not read

    old, new = read_sheet(coded, "answers"), read_sheet(out, "answers")
    coded_pairs = {(PART, "q1"), (PART, "q2")} | {(FULL, q) for q in ASKED}
    assert projection(new, coded_pairs) == projection(old, coded_pairs)  # as they were, coder columns and all
    assert {r["paper_id"] for r in new} == {FULL, PART, FRESH}
    assert {r["question_id"] for r in new} <= set(ASKED)
    fresh = pairs_of(old, {FRESH}, ASKED) | {(PART, "q3")}
    assert projection(new, fresh) == projection(old, fresh)  # this run's rows (the cache's), uncoded
    assert all(not r.get("correct") and not r.get("notes") for r in new if (r["paper_id"], r["question_id"]) in fresh)
    added = [r for r in new if r["stage"] == "coder" and r["paper_id"] == PART]
    assert len(added) == 1 and added[0]["score"] is None and added[0]["notes"] == "added by the coder"

    # adapt and agree read the same coding from the new sheet as from the coded one (where the run has it)
    documents = {d.id: d for d in load_documents(examples_dir / "papers", progress=False)}
    before, after = coding_from_sheets([coded], documents), coding_from_sheets([out], documents)
    in_run = [s for s in before.spans if s.paper_id != GONE and s.question_id in ASKED]
    assert sorted(in_run, key=repr) == sorted(after.spans, key=repr) and in_run
    assert after.pairs == {p for p in before.pairs if p[0] != GONE and p[1] in ASKED}
    old_marks, new_marks = judged(coded), judged(out)
    # left out: the marks of GONE (not in this run) and q4 (not asked) of FULL and PART
    assert new_marks <= old_marks and sum((old_marks - new_marks).values()) == 3

    # the workbook is built from the combined rows, and says what was kept
    book = load_workbook(out, read_only=True)
    papers_sheet = {r[0]: r for r in book["papers"].iter_rows(min_row=2, values_only=True)}
    assert set(papers_sheet) == {FULL, PART, FRESH} and papers_sheet[FULL][3]
    run_sheet = dict(book["run"].iter_rows(min_row=2, values_only=True))
    assert f"coding kept from {coded}" in run_sheet["kept_coding"]
    assert "1 paper with every question coded not read again" in run_sheet["kept_coding"]
    assert "1 paper coded in" in summary and f"is not among this run's papers: not in this sheet, their coding stays " \
        f"in {coded}" in summary
    assert "1 question coded in" in summary and "(q4) is not asked by this run" in summary
    assert f"coding kept from {coded}" in summary

    # the same from the coded sheet saved as CSV, into a CSV
    coded_csv = tmp_path / "coded.csv"
    with coded_csv.open("w", encoding="utf-8", newline="") as f:
        names = [k for k in old[0] if k != "_row"]
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        writer.writerows({k: ("" if r.get(k) is None else r[k]) for k in names} for r in old)
    out_csv = tmp_path / "round-2.csv"
    assert run_cli(papers, "--questions", tiny_questions, "--only", ",".join(ASKED), "--out", out_csv, "--cache",
                   cache, "--keep-coding", coded_csv) == 0
    assert projection(read_sheet(out_csv, "answers"), coded_pairs) == projection(old, coded_pairs)


def sheets(path: Path) -> dict[str, list[tuple]]:
    """A workbook's sheets as rows, but the run sheet (the run's own facts: its time, its cache hits)."""
    book = load_workbook(path, read_only=True)
    return {name: list(book[name].iter_rows(values_only=True)) for name in book.sheetnames if name != "run"}


def run_facts(path: Path) -> dict[str, str]:
    return dict(load_workbook(path, read_only=True)["run"].iter_rows(min_row=2, values_only=True))


@pytest.mark.slow
def test_a_rerun_asks_only_the_pairs_not_coded(first, examples_dir, tiny_questions, tmp_path, monkeypatch, units,
                                               capsys):
    """FULL coded for q1-q3 and q4 added to the question file since; PART's q1 coded alone; FRESH's q4 coded, its q1
    not; GONE not coded. A rerun read every question of every paper (FULL's q1-q3 again for its new q4), its
    cascade and LLM too, then threw the coded pairs' answers away. It now asks only the pairs not coded: q4 of FULL
    and PART about the coding's q1, FRESH's q1 (and q2, q3) and not its q4; its sheets are those of a run that asks
    them all."""
    from mlpsych.coding.keep import KeptCoding

    sheet, cache = first
    coding = Sheet.open(sheet)
    coded_pairs = {(FULL, q) for q in ASKED} | {(PART, "q1"), (FRESH, "q4")}
    for paper, question in coded_pairs:
        coding.mark(paper, (question,))
    coded = tmp_path / "coded.xlsx"
    coding.book.save(coded)

    def rerun(out: Path) -> dict[str, set[tuple[str, str]]]:
        assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", out, "--cache", cache,
                       "--keep-coding", coded) == 0
        given = {stage: set(pairs) for stage, pairs in units.items()}
        for pairs in units.values():
            pairs.clear()
        return given

    def every_pair(self, questions, papers):  # the run as it was: every pair asked, the coded ones' answers replaced
        from mlpsych.pipeline import Settled

        return Settled({}, self.bridges(questions, list(papers)))

    with monkeypatch.context() as patch:
        patch.setattr(KeptCoding, "settles", every_pair, raising=False)
        everything = rerun(tmp_path / "every-pair.xlsx")
    capsys.readouterr()
    given = rerun(tmp_path / "round-2.xlsx")
    assert coded_pairs <= everything["read"]
    assert given["read"] == everything["read"] - coded_pairs  # every pair not coded read, no coded one
    assert given["answered"] == everything["answered"] - coded_pairs
    assert {q for p, q in given["read"] if p == FULL} == {"q4"}  # the question added: FULL's only read
    assert {(PART, "q4"), (FRESH, "q1")} <= given["read"]  # q1 coded, q4 not; and q1 not, q4 coded
    assert sheets(tmp_path / "round-2.xlsx") == sheets(tmp_path / "every-pair.xlsx")
    facts, before = run_facts(tmp_path / "round-2.xlsx"), run_facts(tmp_path / "every-pair.xlsx")
    looked_up = {name: int(f["cache_hits"]) + int(f["cache_misses"]) for name, f in (("now", facts),
                                                                                      ("before", before))}
    assert looked_up["now"] < looked_up["before"]  # the run sheet counts the reads made, not the coded pairs'
    assert facts["windows_read"] == "0"  # the first run on this cache read all the rest
    assert ", none asked again; 0 papers with every question coded not read again" in capsys.readouterr().out


@pytest.fixture
def asked(monkeypatch) -> dict[str, list[str]]:
    """Paper -> the entities of the follow-up sub-questions the local engine asks in it."""
    from mlpsych.pipeline.follow_up import FollowUpStage

    entities: dict[str, list[str]] = {}

    def spy(self, level, ctx, stage_run=FollowUpStage.run):
        stage_run(self, level, ctx)
        for unit in level.units:
            if unit.query.bridge_entity:
                entities.setdefault(unit.doc.id, []).append(unit.query.bridge_entity)

    monkeypatch.setattr(FollowUpStage, "run", spy)
    return entities


@pytest.mark.slow
def test_a_followup_asks_about_the_coding_of_the_question_it_follows(first, examples_dir, tiny_questions, tmp_path,
                                                                     capsys, asked):
    """PART's q1 coded (answers marked wrong, one corrected, one accepted, a technique added), its q4 not. The rerun
    asked q4 about the run's own q1 answers: those marked wrong too, the corrected one in the tool's words, never
    the added one. It asks about exactly the coding's answers now; FRESH, uncoded, as a run without coding does."""
    _, cache = first
    papers = tmp_path / "papers"
    papers.mkdir()
    for paper in (PART, FRESH):
        shutil.copy(examples_dir / "papers" / f"{paper}.txt", papers)
    plain = tmp_path / "results.xlsx"
    assert run_cli(papers, "--questions", tiny_questions, "--only", "q4", "--out", plain, "--cache", cache,
                   cap=3) == 0
    before = dict(asked)
    asked.clear()
    coded = tmp_path / "coded.xlsx"
    techniques = code_techniques(plain, coded, PART)
    capsys.readouterr()
    out = tmp_path / "round-2.xlsx"
    assert run_cli(papers, "--questions", tiny_questions, "--only", "q4", "--out", out, "--cache", cache,
                   "--keep-coding", coded, cap=3) == 0
    assert asked[PART] == [techniques.corrected, techniques.accepted, techniques.added]  # in the coded sheet's order
    assert asked[FRESH] == before[FRESH]
    assert "3 follow-up entities asked about from the coding" in capsys.readouterr().out

    old, new = read_sheet(plain, "answers"), read_sheet(out, "answers")
    fresh = pairs_of(old, {FRESH}, ("q1", "q4"))
    assert projection(new, fresh) == projection(old, fresh)  # uncoded: this run's rows, as before
    assert projection(new, {(PART, "q1")}) == projection(read_sheet(coded, "answers"), {(PART, "q1")})
    q4 = load_question_set(tiny_questions).get("q4")
    followups = [r for r in new if r["paper_id"] == PART and r["question_id"] == "q4"]
    assert {r["bridge_entity"] for r in followups} <= set(asked[PART])  # a sub-question may find no answer
    assert all(r["question"] == q4.sub_question(r["bridge_entity"]) for r in followups)


def one_line_error(capsys) -> str:
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mlpsych: error:")]
    assert len(errors) == 1
    return errors[0]


def test_what_cannot_keep_coding_is_refused_before_any_paper_is_read(examples_dir, tiny_questions, tmp_path, capsys):
    from openpyxl import Workbook

    def sheet(name: str, *rows: list) -> Path:
        book = Workbook()
        book.active.title = "answers"
        for row in [["paper_id", "question_id", "answer", "stage", "correct", "corrected_answer", "notes"], *rows]:
            book.active.append(row)
        book.save(tmp_path / name)
        return tmp_path / name

    def refused(coded: Path, out: Path | None = None) -> str:
        assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--out", out or tmp_path / "new.xlsx",
                       "--keep-coding", coded) == 2
        return one_line_error(capsys)

    coded = sheet("coded.xlsx", [FULL, "q1", "survey", "extractive", "yes", None, None])
    assert "is the --keep-coding sheet" in refused(coded, coded)
    assert "is the --keep-coding sheet" in refused(coded, tmp_path / "." / "coded.xlsx")
    other = sheet("other.xlsx", [FULL, "q1", "survey", "extractive", None, None, "checked"])
    assert "1 of its answers are coded" in refused(coded, other)  # another coded --out is still not written over
    uncoded = sheet("uncoded.xlsx", [FULL, "q1", "survey", "extractive", None, None, None])
    assert "none of its answers is coded" in refused(uncoded)
    (tmp_path / "notes.txt").write_text("not a sheet", encoding="utf-8")
    assert "expected the results sheet of `mlpsych run`" in refused(tmp_path / "notes.txt")
    papers_only = tmp_path / "papers-only.xlsx"
    load_workbook(coded).save(papers_only)
    book = load_workbook(papers_only)
    book["answers"].title = "papers"
    book.save(papers_only)
    assert "no sheet named 'answers'" in refused(papers_only)
    assert not (tmp_path / "new.xlsx").exists()


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["local", pytest.param("ray", marks=needs_ray)])
def test_a_rerun_with_everything_coded_reads_no_paper(engine, first, examples_dir, tiny_questions, tmp_path, capsys,
                                                      read):
    """Every paper coded for the one question asked: nothing to read, and the sheet is the coding; its run sheet
    tells the run's facts all the same (with Ray they were blank, the demo models' note gone: only workers told
    them, and none had a paper)."""
    sheet, cache = first
    book = load_workbook(sheet)
    answers = book["answers"]
    header = [c.value for c in answers[1]]
    marked = set()
    for number, row in enumerate(answers.iter_rows(min_row=2, values_only=True), start=2):
        paper, question = row[header.index("paper_id")], row[header.index("question_id")]
        if question == "q1" and paper not in marked:
            answers.cell(row=number, column=header.index("correct") + 1, value="yes")
            marked.add(paper)
    coded = tmp_path / "coded.xlsx"
    book.save(coded)
    out = tmp_path / "round-2.xlsx"
    capsys.readouterr()
    assert run_cli(examples_dir / "papers", "--questions", tiny_questions, "--only", "q1", "--out", out, "--cache",
                   cache, "--keep-coding", coded, "--engine", engine) == 0
    assert read == [] and len(marked) == 4
    q1 = {(r["paper_id"], r["question_id"]) for r in read_sheet(coded, "answers") if r["question_id"] == "q1"}
    assert projection(read_sheet(out, "answers"), q1) == projection(read_sheet(coded, "answers"), q1)
    summary = capsys.readouterr().out.splitlines()
    finals = sum(is_final(r) for r in read_sheet(out, "answers"))  # as the summary counts (an ungrounded row is not)
    assert summary[0].startswith(f"4 papers, {finals} answers -> {out} in ")
    assert summary[1].endswith("in 4 papers, none asked again; 4 papers with every question coded not read again")
    assert any(line.startswith("note: demo answers") for line in summary)
    run_sheet = dict(load_workbook(out, read_only=True)["run"].iter_rows(min_row=2, values_only=True))
    assert run_sheet["NOTE"].startswith("demo answers") and run_sheet["mlpsych"] and run_sheet["torch"]
    assert run_sheet["models"] and run_sheet["setting max_sub_questions"] == "2" and run_sheet["calibrator"]
    assert run_sheet["windows_read"] == run_sheet["cache_misses"] == "0" and run_sheet["engine"] == engine
    assert run_sheet.get("workers", "0") == "0"  # Ray: no worker started


RUN_ITSELF = ("engine", "workers", "started", "seconds")  # the run sheet's rows that differ between two runs


@needs_ray
@pytest.mark.slow
def test_a_rerun_on_ray_keeps_the_coding_as_the_local_engine_does(first, examples_dir, tiny_questions, tmp_path,
                                                                  ray_cluster, read, units):
    """The coded rows replace the run's after the engine, whichever: the Ray engine reads the same papers, and its
    sheets are the local engine's, sheet for sheet (the run's own facts aside: its counts of cache hits and windows
    read are the same, so its workers skip the coded pairs as here); FRESH's q4, its q1 coded, asks about the
    coding's answers on Ray's workers as here."""
    sheet, cache = first
    coded = tmp_path / "coded.xlsx"
    code(sheet, coded)
    techniques = code_techniques(coded, coded, FRESH)
    papers = tmp_path / "papers"
    papers.mkdir()
    for paper in (FULL, PART, FRESH):
        shutil.copy(examples_dir / "papers" / f"{paper}.txt", papers)
    # FRESH's q4 about the coding's answers is new to the cache: a first run stores it, so the two runs compared are
    # served from the cache alike (their counts of cache hits and windows read are compared too)
    assert run_cli(papers, "--questions", tiny_questions, "--out", tmp_path / "warm.xlsx", "--cache", cache,
                   "--keep-coding", coded) == 0
    read.clear()
    coded_pairs = {(PART, "q1"), (PART, "q2"), (PART, "q4"), (FRESH, "q1")} | {(FULL, q) for q in (*ASKED, "q4")}
    units["read"].clear()
    books = {}
    for engine in ("local", "ray"):
        out = tmp_path / f"round-2-{engine}.xlsx"
        workers = ["--workers", 1] if engine == "ray" else []
        assert run_cli(papers, "--questions", tiny_questions, "--out", out, "--cache", cache, "--keep-coding", coded,
                       "--engine", engine, *workers) == 0
        assert sorted(read) == sorted([PART, FRESH])  # FULL, coded for every question, not given to either engine
        read.clear()
        if engine == "local":  # not a coded pair read, the others all (what a Ray worker reads is not seen here)
            assert units["read"] == {(PART, "q3"), (FRESH, "q2"), (FRESH, "q3"), (FRESH, "q4")}
        books[engine] = load_workbook(out, read_only=True)
    local, ray = books["local"], books["ray"]
    assert local.sheetnames == ray.sheetnames
    for name in local.sheetnames:
        rows = [list(r) for r in local[name].iter_rows(values_only=True)]
        if name == "run":
            assert dict(ray["run"].iter_rows(min_row=2, values_only=True))["workers"] == "1"
            rows = [r for r in rows if r[0] not in RUN_ITSELF]
            assert rows == [list(r) for r in ray[name].iter_rows(values_only=True) if r[0] not in RUN_ITSELF]
        else:
            assert rows == [list(r) for r in ray[name].iter_rows(values_only=True)], name
    answers = read_sheet(tmp_path / "round-2-ray.xlsx", "answers")
    assert projection(answers, coded_pairs) == projection(read_sheet(coded, "answers"), coded_pairs)
    asked = {r["bridge_entity"] for r in answers if r["paper_id"] == FRESH and r["question_id"] == "q4"}
    assert asked <= {techniques.corrected, techniques.accepted, techniques.added}  # all three: a coder's list is
    # not capped by --max-sub-questions 2
    run_sheet = dict(ray["run"].iter_rows(min_row=2, values_only=True))
    assert run_sheet["kept_coding"].endswith("; 3 follow-up entities asked about from the coding")
