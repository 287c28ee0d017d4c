"""Writing a run as a spreadsheet (XLSX), CSV or JSONL, ready for a coding study."""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path, PurePath

from mlpsych.answers import Answer, AnswerStage
from mlpsych.files import remove_stale_temporaries, temporary_path
from mlpsych.documents import Document
from mlpsych.errors import OutputError, cannot_write
from mlpsych.models import DEMO_NOTE
from mlpsych.normalize.answers import item_key
from mlpsych.normalize.grounding import definition_of
from mlpsych.pipeline import RunResult, isolated
from mlpsych.questions import QuestionTemplate

log = logging.getLogger(__name__)

ANSWER_COLUMNS = [
    "paper_id", "source_file", "question_id", "question", "answer", "stage", "models", "ensemble", "final",
    "score", "confidence", "start", "end", "page", "evidence", "bridge_entity",
]
CODER_COLUMNS = ["correct", "corrected_answer", "notes"]  # filled in by a researcher; `mlpsych agree` reads them
SEPARATOR = "; "


def answer_rows(result: RunResult, *, final_only: bool = False) -> list[dict]:
    """One dict per answer, in paper then question order, the surest first (confidence, then the reader's score);
    ``models`` is a list (joined by '+' in sheets)."""
    sources = source_files(result.documents)
    order = {d.id: i for i, d in enumerate(result.documents)}
    q_order = {q.id: i for i, q in enumerate(result.questions.in_run_order())}
    q_text = {q.id: q.text for q in result.questions.questions}
    rows = []
    for a in sorted(result.answers, key=lambda a: (order.get(a.doc_id, 0), q_order.get(a.question_id, 0),
                                                   a.bridge_entity or "", not a.final,
                                                   -(a.confidence or 0.0), -a.score)):
        if final_only and not (a.final or a.stage == AnswerStage.UNGROUNDED):
            continue
        question = q_text.get(a.question_id, "")
        if a.bridge_entity:
            question = result.questions.get(a.question_id).sub_question(a.bridge_entity)
        rows.append(_answer_row(a, question, sources.get(a.doc_id, "")))
    return rows


def source_files(documents: Iterable[Document]) -> dict[str, str]:
    """``{paper id: file}`` as the sheets show it: the file's name, or, where files of different folders share a
    name (``a/paper.pdf``, ``b/paper.pdf``), as many of its folders as tell them apart: both rows said
    ``paper.pdf``, and nothing showed which file was ``paper`` and which ``paper-2``."""
    paths = {d.id: PurePath(d.source_path or "") for d in documents}
    depth = dict.fromkeys(paths, 1)
    while True:
        labels = {i: str(PurePath(*p.parts[-depth[i]:])) if p.parts else "" for i, p in paths.items()}
        groups: dict[str, list[str]] = defaultdict(list)
        for i, label in labels.items():
            groups[label].append(i)
        clashing = [i for group in groups.values() if len({paths[j] for j in group}) > 1
                    for i in group if depth[i] < len(paths[i].parts)]
        if not clashing:
            return labels
        for i in clashing:
            depth[i] += 1


def shown(text: str) -> str:
    """An answer as a sheet shows it: white space as one space, as in its evidence sentence (the released rules
    keep a span's line breaks in ``Answer.text``; its offsets still point at the exact text)."""
    return " ".join(text.split())


def _answer_row(a: Answer, question: str, source_file: str) -> dict:
    """The row's columns (:data:`ANSWER_COLUMNS`), then the coder's cells of a row kept from a coded sheet. A
    coder's added answer has no reader score: its cell stays blank, as the review view wrote it."""
    score = None if a.stage == AnswerStage.CODER else float(f"{a.score:.4g}")
    return {
        "paper_id": a.doc_id, "source_file": source_file, "question_id": a.question_id,
        "question": question, "answer": shown(a.text), "stage": str(a.stage), "models": list(a.models),
        "ensemble": a.ensemble, "final": a.final, "score": score, "confidence": a.confidence,
        "start": a.start,
        "end": a.end, "page": a.page, "evidence": a.evidence, "bridge_entity": a.bridge_entity, **a.coder,
    }


def coder_header(rows: Iterable[dict]) -> list[str]:
    """The coder columns of the answers: :data:`CODER_COLUMNS`, then any other column of coding kept from a coded
    sheet (a second coder's ``correct_2``, a column of the lab's own), in the order first met."""
    written = {*ANSWER_COLUMNS, *CODER_COLUMNS}
    return CODER_COLUMNS + list(dict.fromkeys(k for row in rows for k in row if k not in written))


def without_unwritable_papers(result: RunResult) -> RunResult:
    """The result less the rows of papers whose rows cannot be written (text that cannot be encoded, a value a
    writer rejects): such a paper gets an ``export`` status, every other paper is written in full."""
    answers: dict[str, list[Answer]] = defaultdict(list)
    for a in result.answers:
        answers[a.doc_id].append(a)
    outputs: dict[str, list[dict]] = defaultdict(list)
    for o in result.llm_outputs:
        outputs[o["paper_id"]].append(o)
    bad: set[str] = set()
    for doc in result.documents:
        written = False
        with isolated(result, doc.id, "export"):
            alone = replace(result, documents=[doc], answers=answers.get(doc.id, []), llm_outputs=outputs[doc.id])
            for row in [*answer_rows(alone), *paper_rows(alone), *alone.llm_outputs]:
                json.dumps(row, ensure_ascii=False, default=str).encode("utf-8")
            written = True
        if not written:
            bad.add(doc.id)
    if not bad:
        return result
    return replace(result, answers=[a for a in result.answers if a.doc_id not in bad],
                   llm_outputs=[o for o in result.llm_outputs if o["paper_id"] not in bad])


def paper_questions(result: RunResult) -> list[QuestionTemplate]:
    """The questions of the papers sheet's columns, in run order: not one kept only for its follow-ups
    (``bridge_only``), whose column, without its answers, read as no answer in every paper."""
    return [q for q in result.questions.in_run_order() if q.id not in result.bridge_only]


def paper_rows(result: RunResult) -> list[dict]:
    """One row per paper, one column per question of :func:`paper_questions` (final answers joined); problems in a
    status column, what ingest noted of a paper it read (pages without text) in ``text_notes``."""
    finals: dict[tuple[str, str], list[Answer]] = defaultdict(list)
    for a in result.answers:
        if a.final:
            finals[(a.doc_id, a.question_id)].append(a)
    rows = []
    sources = source_files(result.documents)
    for doc in result.documents:
        row = {"paper_id": doc.id, "source_file": sources[doc.id],
               "status": "; ".join(result.errors.get(doc.id, [])) or "ok"}
        for q in paper_questions(result):
            answers = sorted(finals.get((doc.id, q.id), []), key=lambda a: -a.score)
            if q.bridge_from:
                texts = [f"{a.bridge_entity}: {shown(a.text)}" for a in answers]
            else:
                texts = list(dict.fromkeys(shown(a.text) for a in answers))
            row[q.id] = SEPARATOR.join(texts)
        row["text_notes"] = "; ".join(doc.notes)  # last: the question columns keep their places
        rows.append(row)
    return rows


FREQUENCY_COLUMNS = ["question_id", "question", "answer", "n_papers", "papers", "n_mentions"]


def _answer_key(text: str, kind: str, paper: str) -> str:
    """Answers that count as one: an entity written differently (the key the LLM's items of one paper are told
    apart by: case, hyphens, a plural), or named by the abbreviation, long form or "long form (ABBR)" its paper
    defines (so "RF" in one paper counts with "random forests" in another, and an "LDA" defined as two things in two
    papers counts as two); other answers differing only in case or spacing, their signs kept ("β = −0.23" is not
    "β = 0.23")."""
    if kind != "entity":
        return shown(text).casefold()
    defined = definition_of(text, paper)
    return item_key(defined.long if defined else text)


def frequency_rows(result: RunResult) -> list[dict]:
    """Each distinct final answer per question with the papers mentioning it (the paper's "exploded" view).

    Final answers are the normalized ones where the LLM stage ran, else the extractive ones. An entity written
    differently is one answer ("random forests", "Random forest"; "RF" where its paper defines it so). The shown text
    is the most frequent spelling; papers are listed in corpus order. Rows: question order, then most papers first.
    """
    doc_order = {d.id: i for i, d in enumerate(result.documents)}
    q_order = {q.id: i for i, q in enumerate(result.questions.in_run_order())}
    q_text = {q.id: q.text for q in result.questions.questions}
    kinds = {q.id: q.kind for q in result.questions.questions}
    texts = {d.id: d.text for d in result.documents}
    groups: dict[tuple[str, str], dict] = {}
    for a in result.answers:
        if not a.final or not a.text.strip():
            continue
        key = _answer_key(a.text, kinds.get(a.question_id, ""), texts.get(a.doc_id, ""))
        group = groups.setdefault((a.question_id, key), {"spellings": {}, "papers": set(), "n": 0})
        group["spellings"][shown(a.text)] = group["spellings"].get(shown(a.text), 0) + 1
        group["papers"].add(a.doc_id)
        group["n"] += 1
    rows = []
    for (question_id, _), group in groups.items():
        spelling = sorted(group["spellings"].items(), key=lambda item: (-item[1], item[0]))[0][0]
        papers = sorted(group["papers"], key=lambda d: (doc_order.get(d, len(doc_order)), d))
        rows.append({"question_id": question_id, "question": q_text.get(question_id, ""), "answer": spelling,
                     "n_papers": len(papers), "papers": SEPARATOR.join(papers), "n_mentions": group["n"]})
    rows.sort(key=lambda r: (q_order.get(r["question_id"], len(q_order)), -r["n_papers"], r["answer"].casefold()))
    return rows


def run_rows(result: RunResult) -> list[tuple[str, str]]:
    """The run sheet: what produced the answers (versions, models, settings, questions), a demo run's note first."""
    info = result.info.to_dict()
    settings = info.pop("settings", {})
    rows = [("NOTE", DEMO_NOTE)] if result.info.demo_models else []
    rows += [(k, ", ".join(map(str, v)) if isinstance(v, list) else str(v)) for k, v in info.items()]
    rows += [(f"setting {k}", str(v)) for k, v in settings.items()]
    rows += [(f"question {q.id}", f"{q.text} | models: {', '.join(q.models)} | top_k {q.top_k}")
             for q in result.questions.in_run_order()]
    return rows


def write_jsonl(result: RunResult, path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in answer_rows(result):  # a kept coder's cell may be a date: written as its text
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")


def write_csv(result: RunResult, path: Path) -> None:
    """The final answers, with the coder columns blank (but for coding kept from a coded sheet): a CSV is a coding
    form too (`adapt`, `agree`, `calibrate` and `eval` read it back)."""
    rows = answer_rows(result, final_only=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=ANSWER_COLUMNS + coder_header(rows), restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: csv_text(v) for k, v in {**row, "models": "+".join(row["models"])}.items()})


def write_xlsx(result: RunResult, path: Path) -> None:
    """Sheets: papers, answers (final answers with coder columns), frequencies (distinct answers with their papers),
    model_answers (every model's rows), llm, run."""
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font

    wb = Workbook()
    papers = paper_rows(result)
    finals = answer_rows(result, final_only=True)
    coder = coder_header(finals)
    sheets = {
        "papers": (list(papers[0].keys()) if papers else ["paper_id", "source_file", "status", "text_notes"],
                   [list(r.values()) for r in papers]),
        "answers": (ANSWER_COLUMNS + coder, [_cells(r) + [r.get(c) for c in coder] for r in finals]),
        "frequencies": (FREQUENCY_COLUMNS, [[r[c] for c in FREQUENCY_COLUMNS] for r in frequency_rows(result)]),
        "model_answers": (ANSWER_COLUMNS, [_cells(r) for r in answer_rows(result)
                                         if not r["final"] and r["stage"] != "ungrounded"]),
        "llm": (["paper_id", "question_id", "llm", "model", "raw_output"],
                [[o["paper_id"], o["question_id"], o["llm"], o["model"], o["raw_output"]] for o in result.llm_outputs]),
        "run": (["key", "value"], [list(r) for r in run_rows(result)]),
    }
    check_rows_fit(sheets)
    wb.remove(wb.active)
    widths = {"answer": 40, "evidence": 80, "question": 40, "raw_output": 80, "value": 80, "status": 40,
              "papers": 60, "n_papers": 10, "n_mentions": 12, "paper_id": 28, "source_file": 30, "page": 8,
              "score": 10, "confidence": 11, "start": 9, "end": 9, "final": 8, "ensemble": 10, "stage": 12,
              "question_id": 12, "correct": 10, "corrected_answer": 40, "notes": 40, "text_notes": 40}
    for name, (header, rows) in sheets.items():
        ws = wb.create_sheet(name)
        ws.append(header)
        for cell in ws[1]:
            cell.font = Font(bold=True)
        for row in rows:
            ws.append(text_cells(ws, [cell_value(v) for v in row]))
        ws.freeze_panes = "A2"
        if name == "answers":
            mark_choices(ws, header.index("correct") + 1)
        if rows:
            ws.auto_filter.ref = ws.dimensions  # filter arrows on the header, for coders sorting by question or paper
        for i, column in enumerate(header, start=1):
            letter = ws.cell(row=1, column=i).column_letter
            ws.column_dimensions[letter].width = widths.get(column, 18 if column in ANSWER_COLUMNS else 30)
            if column in ("evidence", "raw_output", "value", "answer", "question", "papers", "corrected_answer",
                          "notes") or name == "papers":
                for cell in ws[letter][1:]:
                    cell.alignment = Alignment(wrap_text=True, vertical="top")
    # Zipped in memory, then written: openpyxl's zip file, left open by a failed write to disk, failed again when
    # collected and printed a traceback under the error.
    buffer = io.BytesIO()
    wb.save(buffer)
    path.write_bytes(buffer.getvalue())


EXCEL_ROW_LIMIT = 1_048_576  # rows of a sheet, its header one of them: Excel opens no more


def check_rows_fit(sheets: dict[str, tuple[list[str], list[list]]]) -> None:
    """A sheet with more rows than Excel opens is refused before anything is written, naming the sheet and the
    files that hold every row (a large study's answers): openpyxl wrote past the limit and failed there, so the run
    ended in a "row numbers must be between 1 and 1048576" error reported as a bug."""
    over = {name: len(rows) for name, (_, rows) in sheets.items() if len(rows) + 1 > EXCEL_ROW_LIMIT}
    if over:
        sheets_over = " and ".join(f"{name} {n + 1:,} rows" for name, n in over.items())
        raise OutputError(f"as a workbook its sheets would have {sheets_over}, past Excel's {EXCEL_ROW_LIMIT:,} rows "
                          "a sheet (its header one of them): write .csv (the final answers, with the coder columns) "
                          "or .jsonl (every answer of every model), which hold every row")


def text_cells(ws, values: list) -> list:
    """A row's cells, text kept as text: text from papers and LLMs is data, "=..." must never be a formula. Made
    before they are appended: setting them after through ``ws[ws.max_row]`` made openpyxl scan every cell of the
    sheet once a row (its last row and column are found so), an export quadratic in the answers (a 1,000-paper
    run's workbook took over ten minutes)."""
    from openpyxl.cell.cell import Cell

    cells = []
    for value in values:
        cell = Cell(ws, value=value)
        if isinstance(value, str):
            cell.data_type = "s"
        cells.append(cell)
    return cells


def mark_choices(ws, column: int) -> None:
    """A yes/no list on a coder's ``correct`` column, down to rows a coder adds: a coder working in Excel picks the
    marks the app writes. Other marks `mlpsych agree` reads ("y", "1", "✓") stay allowed, after a warning."""
    ws.add_data_validation(choice_list(column))


def choice_list(column: int):
    """The yes/no list of :func:`mark_choices` (an openpyxl ``DataValidation``), also written by the review into a
    workbook it does not load whole (:mod:`mlpsych.workbook`)."""
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.datavalidation import DataValidation

    choices = DataValidation(type="list", formula1='"yes,no"', allow_blank=True, showErrorMessage=True,
                             showInputMessage=True, errorStyle="warning",
                             error="Mark an answer yes (correct) or no (wrong); leave it blank if not coded.",
                             errorTitle="correct", prompt="yes or no; blank: not coded", promptTitle="correct")
    letter = get_column_letter(column)
    choices.add(f"{letter}2:{letter}1048576")
    return choices


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet program read a CSV cell as a formula
_SIGNED_NUMBER = re.compile(r"[-+]\d+(?:[.,]\d+)*")  # "-0.23" as printed: a value, which no program runs


def csv_text(value):
    """Spreadsheet programs run CSV cells starting with = + - @ (or a tab or carriage return before them) as
    formulas (``-2+3+cmd|' /C calc'!A0``): such text gets a leading apostrophe. Every CSV mlpsych writes (run, eval,
    agree) passes its cells through here; numbers stay numbers, a signed number quoted from a paper ("-0.23") too."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _SIGNED_NUMBER.fullmatch(value):
        return f"'{value}"
    return value


EXCEL_CELL_LIMIT = 32_767  # characters; Excel calls a workbook with a longer cell damaged and cuts it on repair


def cell_value(value):
    """Control characters (from PDFs or LLM output) are not allowed in XLSX cells: replace them visibly. A cell over
    Excel's limit (the papers of an answer most of a large study gives) is cut where a reader sees it was."""
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    if not isinstance(value, str):
        return value
    value = ILLEGAL_CHARACTERS_RE.sub("\ufffd", value)
    if len(value) <= EXCEL_CELL_LIMIT:
        return value
    note = " … [{:,} more characters cut at Excel's cell limit]"
    kept = EXCEL_CELL_LIMIT - len(note.format(len(value)))
    return value[:kept] + note.format(len(value) - kept)


def _cells(row: dict) -> list:
    return [("+".join(row[c]) if c == "models" else row[c]) for c in ANSWER_COLUMNS]


WRITERS = {".xlsx": write_xlsx, ".csv": write_csv, ".jsonl": write_jsonl}


def write_result(result: RunResult, path: Path) -> Path:
    """Write by file extension (.xlsx, .csv or .jsonl); written to a temporary file first and renamed, so a crash
    never leaves half a file and a failed write (``OutputError``) leaves a file already there as it was."""
    path = Path(path)
    writer = WRITERS.get(path.suffix.lower())
    if writer is None:
        raise ValueError(f"output {path.name!r}: use a .xlsx, .csv or .jsonl file name")
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path)
        tmp = temporary_path(path)
        writer(without_unwritable_papers(result), tmp)
        tmp.replace(path)
    except OutputError as error:  # the writer's refusal, said of the file asked for
        raise OutputError(f"{path}: {error}") from None
    except OSError as error:  # a full disk, a file held open by a spreadsheet program (Windows), a folder of its name
        raise cannot_write(path, error) from None
    finally:  # a failed or interrupted write leaves no half file (after the rename there is none)
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    log.info("wrote %s", path)
    return path
