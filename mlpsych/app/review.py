"""The review view's logic: a coder works through a results spreadsheet paper by paper, least-sure answers first.

Only the ``answers`` sheet is read, and written back row by row (:mod:`mlpsych.workbook`; openpyxl reading and
writing all six sheets took minutes at 1,000 papers). Each change is kept at once (autosave): appended to a small
file beside the workbook and forced to disk (:mod:`mlpsych.journal`), and written into the workbook (beside it and
renamed, so a crash never leaves half a file) when the coder leaves a paper or downloads the coded sheet, and half
a minute after the last change (:mod:`mlpsych.app.idle_write`: a tab closed on a paper left it out); until then
every reader of the sheet applies the kept changes too. Marks go into the coder
columns of the ``answers`` sheet (``correct``, ``corrected_answer``, ``notes``; a second coder's into
``correct_<name>``, ``corrected_answer_<name>``, ``notes_<name>``, which ``mlpsych agree`` compares with the
first), and an answer the tool missed becomes a new row whose ``stage`` is ``coder``, with the offsets, page and
evidence sentence of where its text is in the paper (text that is not in the paper is refused). A coded workbook
reopens where the coding stopped; ``mlpsych adapt --coded`` and ``mlpsych calibrate --coded`` read it back.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mlpsych import workbook
from mlpsych.app.idle_write import IDLE_WRITE_S, IdleWrite
from mlpsych.coding.coded import CODER_STAGE, locate
from mlpsych.documents import Document
from mlpsych.errors import AppInputError, UserError
from mlpsych.evaluation.sheets import is_csv
from mlpsych.export import choice_list, source_files
from mlpsych.files import first_free, written_whole
from mlpsych.journal import Journal, Kept, not_applied
from mlpsych.marks import row_stage

SHEET = "answers"
MARKS = {True: "yes", False: "no", None: None}
T = TypeVar("T")
_CODER_NAME = re.compile(r"^[A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ReviewItem:
    """One answer as the review shows it; ``row`` is its row in the sheet (how a change finds it)."""

    row: int
    paper_id: str
    question_id: str
    question: str
    answer: str
    stage: str
    confidence: float | None
    page: int | None
    evidence: str
    bridge_entity: str | None
    correct: bool | None
    corrected: str
    notes: str

    @property
    def coded(self) -> bool:
        return self.correct is not None or bool(self.corrected) or self.stage == CODER_STAGE


def coder_columns(coder: str = "") -> tuple[str, str, str]:
    """The (correct, corrected_answer, notes) columns of a coder: the first coder's plain names, another's with
    ``_<name>`` (letters, digits, underscores)."""
    coder = coder.strip()
    if not _CODER_NAME.match(coder):
        raise AppInputError(f"coder name {coder!r}: use letters, digits and underscores only")
    suffix = f"_{coder}" if coder else ""
    return f"correct{suffix}", f"corrected_answer{suffix}", f"notes{suffix}"


def serial(method: Callable[..., T]) -> Callable[..., T]:
    """A method of the sheet run alone: the page's thread and the idle write's timer thread share the sheet."""

    @functools.wraps(method)
    def alone(self: ReviewSheet, *args: Any, **kwargs: Any) -> T:
        with self._lock:
            return method(self, *args, **kwargs)

    return alone


class ReviewSheet:
    """A results workbook opened for coding, with the papers' texts (needed to place added answers). The workbook
    is written when the coder leaves a paper or downloads it (:meth:`save`), and ``idle_write`` seconds after the
    last change (:mod:`mlpsych.app.idle_write`; None: not then)."""

    def __init__(self, path: str | Path, documents: dict[str, Document], coder: str = "",
                 idle_write: float | None = IDLE_WRITE_S) -> None:
        self._lock = threading.RLock()
        self._idle = IdleWrite(self._write_when_idle, idle_write)
        self.idle_error = ""  # why the last idle write failed, for the page to say
        self.path = Path(path)
        self.documents = documents
        self.columns = coder_columns(coder)
        if not self.path.is_file():
            raise AppInputError(f"{self.path}: no such spreadsheet")
        if is_csv(self.path):  # openpyxl's own words asked to "check you can open it with Excel first"
            raise AppInputError(f"{self.path}: a review continues in a workbook, not a CSV: open it in Excel or "
                                "LibreOffice, name its sheet 'answers' and save it as .xlsx (its coding goes with "
                                "it), then give that file (`mlpsych agree`, `calibrate` and `adapt` read the CSV)")
        try:
            data = self.path.read_bytes()
        except OSError as error:
            raise AppInputError(f"{self.path}: cannot open as a workbook ({error})") from None
        self.unsaved = False  # the last save failed: the file lacks coding held here
        self._load(data)
        self.journal = Journal(self.path)
        self.notice = self._changes_kept()
        strangers = sorted(set(self._rows) - set(documents))
        if strangers and documents:
            raise AppInputError(f"{len(strangers)} paper(s) of the sheet are not among the papers given: "
                                f"{', '.join(strangers[:10])} (give the papers this sheet was made from)")

    def _load(self, data: bytes) -> None:
        """The answers sheet of the workbook ``data`` as this review's: the workbook as last written, what the
        changes made here go into."""
        try:
            table = workbook.read_values(data, SHEET)
        except Exception as error:  # openpyxl raises several types for a file that is not a workbook
            raise AppInputError(f"{self.path}: cannot open as a workbook ({error})") from None
        if table is None:
            raise AppInputError(f"{self.path}: no '{SHEET}' sheet (is it a results spreadsheet of mlpsych?)")
        self._written = data
        self._table = table or [[]]  # the answers sheet's values, a list a row
        self._changed: workbook.Cells = {}  # cells set here that the file lacks
        self._lists: list[int] = []  # columns given a yes/no list here that the file lacks
        self.header = [str(value or "").strip().lower() for value in self._table[0]]
        for needed in ("paper_id", "question_id", "answer"):
            if needed not in self.header:
                raise AppInputError(f"{self.path}: the '{SHEET}' sheet has no '{needed}' column")
        self._index = {name: i + 1 for i, name in enumerate(self.header)}
        for column in self.columns:
            self._column(column)
        # what every redraw shows, read once from the 35,000 rows of a large study (3 s a redraw) and again only
        # for a paper a change touched
        self._counts: dict[str, tuple[int, int]] = {}
        self._questions: dict[str, str] | None = None
        self._rows = self._rows_by_paper()

    def _catch_up(self) -> str:
        """The workbook as written elsewhere since this review read or wrote it (by another review leaving its
        paper, or saved from Excel) taken as this review's, so that this review's write keeps what was written
        there: the changes made here are in the changes file, which applies them to it (:meth:`_take`). Where that
        cannot be (the workbook there unreadable, or changes held here alone, their file unwritable), that version
        is copied aside (kept) before this review writes over it; said."""
        try:
            on_disk = self.path.read_bytes()
        except FileNotFoundError:
            return ""
        if on_disk == self._written:
            return ""
        if not self.unsaved:
            with contextlib.suppress(AppInputError):
                self._load(on_disk)
                return ""
        aside = first_free(lambda n: self.path.with_name(f"{self.path.stem}-changed-elsewhere-{n}{self.path.suffix}"))
        with written_whole(aside) as partial:  # a copy cut short (a full disk) is no copy to trust: none is left
            partial.write_bytes(on_disk)
        return (f"{self.path.name} was changed elsewhere during this review and could not take this review's "
                f"coding: it is written over, and the version written elsewhere is kept in {aside.name}.")

    def _column(self, name: str) -> None:
        """A column the sheet lacks (a coder's), added at the end; a ``correct`` column gets the yes/no list."""
        if name in self._index:
            return
        self.header.append(name)
        self._index[name] = len(self.header)
        self._set(1, name, name)
        if name == "correct" or name.startswith("correct_"):
            self._lists.append(len(self.header))

    def _changes_kept(self) -> str:
        """The changes kept beside the workbook by a review that did not write them into it (stopped, or still
        open elsewhere), applied here; those the workbook, changed elsewhere since, cannot take are moved aside
        and said."""
        kept = self.journal.state(self._paper_rows, len(self._table))
        if kept.written:
            self.journal.clear()
        return self._take(kept)

    def _take(self, kept: Kept) -> str:
        """The kept changes the sheet can take applied here; those in conflict with it moved aside (kept), said
        (nothing when there are none)."""
        if kept.changes:
            self._apply(kept.changes)
            self._rows = self._rows_by_paper()
            self._counts.clear()
        if not kept.conflicts:
            return ""
        return not_applied(len(kept.conflicts), self.path, self.journal.set_aside(kept.conflicts))

    def _apply(self, changes) -> None:
        for row, values in changes:
            for name, value in values.items():
                self._column(name)
                self._set(row, name, value)
            self._counts.pop(str(self._get(row, "paper_id") or ""), None)
            if "question_id" in values:
                self._questions = None

    # -- reading -----------------------------------------------------------------------------------------------
    def _paper_rows(self, papers: set[str]) -> Iterator[dict[str, Any]]:
        """The papers' rows as ``read_sheet`` gives them: what the kept changes find their rows in."""
        for paper in papers:
            for row in self._rows.get(paper, []):
                yield {name: self._get(row, name) for name in self.header} | {"_row": row}

    def _rows_by_paper(self) -> dict[str, list[int]]:
        """Each paper's rows, in sheet order, from one pass over the sheet: the page asked every paper for its
        rows on every redraw, each a pass over the whole sheet (papers x rows; a 1,000-paper run's review took
        minutes a click)."""
        rows: dict[str, list[int]] = {}
        for row in range(2, len(self._table) + 1):
            paper = self._get(row, "paper_id")
            if paper:
                rows.setdefault(str(paper), []).append(row)
        return rows

    def _get(self, row: int, name: str) -> Any:
        index = self._index.get(name)
        values = self._table[row - 1] if index and row <= len(self._table) else ()
        return values[index - 1] if index and index <= len(values) else None

    def _set(self, row: int, name: str, value: Any) -> None:
        column = self._index[name]
        self._table.extend([] for _ in range(row - len(self._table)))
        values = self._table[row - 1]
        values.extend([None] * (column - len(values)))
        values[column - 1] = value
        self._changed.setdefault(row, {})[column] = value

    @serial
    def papers(self) -> list[str]:
        """Papers in sheet order."""
        return list(self._rows)

    @serial
    def questions(self) -> dict[str, str]:
        """Question id -> question text, as the sheet has them (a follow-up's own sub-question aside)."""
        if self._questions is not None:
            return dict(self._questions)
        out: dict[str, str] = {}
        for row in range(2, len(self._table) + 1):
            qid = str(self._get(row, "question_id") or "")
            if qid and not self._get(row, "bridge_entity"):
                out.setdefault(qid, str(self._get(row, "question") or ""))
            elif qid:
                out.setdefault(qid, "")
        self._questions = out
        return dict(out)

    @serial
    def entities(self, paper_id: str, question_id: str | None = None) -> list[str]:
        """The bridge entities (e.g. q1's techniques) that the paper's follow-up rows ask about, in sheet order;
        ``question_id``: of that follow-up only. Empty for a question that is not a follow-up."""
        out: dict[str, None] = {}
        for row in self._rows.get(paper_id, []):
            entity = str(self._get(row, "bridge_entity") or "").strip()
            if entity and question_id in (None, str(self._get(row, "question_id") or "")):
                out.setdefault(entity)
        return list(out)

    @serial
    def items(self, paper_id: str) -> list[ReviewItem]:
        """The paper's answers, least sure first (no confidence: last), then in sheet order."""
        from mlpsych.marks import parse_code

        correct, corrected, notes = self.columns
        out = []
        for row in self._rows.get(paper_id, []):
            try:
                mark = parse_code(self._get(row, correct))
            except ValueError:
                mark = None
            confidence = self._get(row, "confidence")
            page = self._get(row, "page")
            out.append(ReviewItem(
                row, paper_id, str(self._get(row, "question_id") or ""), str(self._get(row, "question") or ""),
                str(self._get(row, "answer") or ""), self._stage(row),
                float(confidence) if isinstance(confidence, (int, float)) else None,
                int(page) if isinstance(page, (int, float)) else None, str(self._get(row, "evidence") or ""),
                self._get(row, "bridge_entity") or None, mark, str(self._get(row, corrected) or ""),
                str(self._get(row, notes) or "")))
        return sorted(out, key=lambda i: (i.confidence is None, i.confidence or 0.0, i.row))

    def _stage(self, row: int) -> str:
        """A row's stage as every command reads it (:func:`mlpsych.marks.row_stage`: blank, typed in by hand, is a
        coder's added answer; nothing where the sheet has no stage column)."""
        return row_stage({"stage": self._get(row, "stage")} if "stage" in self._index else {})

    @serial
    def coded_count(self, paper_id: str) -> tuple[int, int]:
        """(answers coded, answers) of a paper, the coder's added answers not counted."""
        if paper_id not in self._counts:
            items = [i for i in self.items(paper_id) if i.stage != CODER_STAGE]
            self._counts[paper_id] = sum(i.coded for i in items), len(items)
        return self._counts[paper_id]

    @serial
    def coded_counts(self) -> dict[str, tuple[int, int]]:
        """:meth:`coded_count` of every paper, in sheet order: what the paper menu shows on every redraw."""
        return {paper: self.coded_count(paper) for paper in self._rows}

    # -- changes (each kept at once) -------------------------------------------------------------------------
    @serial
    def mark(self, row: int, correct: bool | None) -> None:
        self._change(row, {self.columns[0]: MARKS[correct]})

    @serial
    def correct_to(self, row: int, text: str) -> bool:
        """Write a corrected answer; True when its text is in the paper (``mlpsych adapt`` skips one that is not)."""
        text = text.strip()
        self._change(row, {self.columns[1]: text or None})
        doc = self.documents.get(str(self._get(row, "paper_id") or ""))
        return not text or doc is None or locate(text, doc.text) is not None

    @serial
    def note(self, row: int, text: str) -> None:
        self._change(row, {self.columns[2]: text.strip() or None})

    @serial
    def add(self, paper_id: str, question_id: str, text: str, bridge_entity: str | None = None) -> int:
        """A missed answer as a new row (stage ``coder``, marked correct), placed where its text is in the paper;
        text the paper does not contain is refused. An answer to a follow-up (q4) is about ``bridge_entity``, or,
        when none is given, about the paper's entity of that follow-up mentioned nearest to it, as `mlpsych adapt`
        reads a follow-up's gold answer; an answer to another question is about none."""
        doc = self.documents.get(paper_id)
        if doc is None:
            raise AppInputError(f"paper {paper_id!r} is not among the papers given")
        text = " ".join(text.split())
        found = locate(text, doc.text)
        if found is None:
            shown = text if len(text) <= 80 else text[:77] + "..."
            raise AppInputError(f"Not added: {shown!r} is not in the text of {paper_id} (paste it as it appears "
                                "in the paper)")
        start, end = found
        question = self.questions().get(question_id, "")
        entities = self.entities(paper_id, question_id)
        bridge_entity = ((bridge_entity or "").strip() or _nearest(entities, doc.text, start)) if entities else None
        values = {"paper_id": paper_id, "source_file": source_files(self.documents.values())[paper_id],
                  "question_id": question_id,
                  "question": question, "answer": doc.text[start:end], "stage": CODER_STAGE, "models": "",
                  "ensemble": False, "final": True, "start": start, "end": end, "page": doc.page_at(start),
                  "evidence": doc.sentence_around(start, end), "bridge_entity": bridge_entity,
                  self.columns[0]: MARKS[True]}
        row = len(self._table) + 1
        self._rows.setdefault(paper_id, []).append(row)
        self._change(row, {name: value for name, value in values.items() if name in self.header})
        return row

    def _change(self, row: int, values: dict[str, Any]) -> None:
        """Cells of one row set here and kept at once beside the workbook; after a change that could not be kept,
        the workbook is written instead (with all the coding held here)."""
        before = {name: self._get(row, name) for name in self.header}
        self._apply([(row, values)])
        if self.unsaved:
            self.save()
            return
        try:
            self.journal.record(row, values, before)
        except OSError as error:
            self.unsaved = True
            raise self._not_saved(error) from None
        self._idle.touch()

    @serial
    def _write_when_idle(self) -> None:
        """:meth:`save`, a while after the last change; a failure kept for the page to say (no one waits here)."""
        try:
            self.save()
        except AppInputError as error:
            self.idle_error = str(error)

    @property
    def pending(self) -> bool:
        """Whether the workbook file lacks changes made here (kept beside it, or not kept at all)."""
        return self.unsaved or self.journal.path.exists()

    @serial
    def save(self) -> None:
        """Write the coding into the workbook (beside it, then renamed) and remove the changes kept beside it;
        nothing to do when the file has it all. Changes another session kept beside it meanwhile are applied
        first, so none is written over. A file that cannot be written (open in Excel on Windows, its folder gone)
        is said in one message; the coding stays here and goes out with the next save or the download
        (:meth:`workbook_bytes`)."""
        self._idle.cancel()
        if not self.pending:
            return
        try:
            caught_up = self._catch_up()
            taken = self._take(self.journal.state(self._paper_rows, len(self._table)))
            self.notice = " ".join(filter(None, (caught_up, taken))) or self.notice
            written = self._coded()
            with written_whole(self.path) as partial:  # its own name: two reviews saving at once never share one
                partial.write_bytes(written)
                self.journal.written(partial)
            self.journal.clear()
        except OSError as error:
            self.unsaved = True
            raise self._not_saved(error) from None
        self._written, self._changed, self._lists = written, {}, []
        self.unsaved = False

    def _coded(self) -> bytes:
        """The workbook with the coding held here: the one last written, its changed rows rewritten."""
        from openpyxl.xml.functions import tostring

        lists = [tostring(choice_list(column).to_tree()) for column in self._lists]
        return workbook.write_cells(self._written, SHEET, self._changed, lists)

    def _not_saved(self, error: OSError) -> AppInputError:
        return AppInputError(
            f"Not saved in {self.path}: {error.strerror or error} (is it open in another program, or its folder "
            "gone?). The coding stays on this page and is saved with your next change once the file can be "
            "written; 'Download the coded spreadsheet' holds all of it.")

    @serial
    def workbook_bytes(self) -> bytes:
        """The coded workbook for a download: written first (:meth:`save`), then the file; the coding held here
        when the file cannot be written."""
        with contextlib.suppress(AppInputError):
            self.save()
        if not self.unsaved:
            with contextlib.suppress(OSError):
                return self.path.read_bytes()
        return self._coded()


def _nearest(entities: list[str], text: str, start: int) -> str | None:
    """The entity whose mention in ``text`` is nearest to ``start`` (one not mentioned counts as farthest)."""
    def distance(entity: str) -> float:
        return min((abs(m.start() - start) for m in re.finditer(re.escape(entity), text, re.IGNORECASE)),
                   default=float("inf"))

    return min(entities, key=distance, default=None)


def papers_for_review(source: str) -> dict[str, Document]:
    """The papers a coded sheet was made from (a folder, texts.jsonl or text.json), by id; problems as messages."""
    from mlpsych.ingest import load_documents

    source = source.strip()
    if not source:
        raise AppInputError("Give the papers the spreadsheet was made from (a folder, texts.jsonl or text.json).")
    try:
        documents = load_documents(Path(source).expanduser(), progress=False)
    except UserError as error:
        raise AppInputError(f"Papers {source}: {error}") from None
    return {d.id: d for d in documents if d.ok}


def fresh_review_path(folder: Path) -> Path:
    """The first ``review-N.xlsx`` in ``folder`` not taken: a run's review never lands in an earlier one's file."""
    return first_free(lambda n: folder / f"review-{n}.xlsx")


def _tool_answers(source: Path | bytes) -> set[tuple[str, str, str]]:
    """(paper, question, answer) of the tool's rows of a results workbook (a coder's added rows left out): what
    tells one run's spreadsheet from another's."""
    from mlpsych.evaluation.evaluate import read_sheet

    return {(str(r.get("paper_id") or ""), str(r.get("question_id") or ""), str(r.get("answer") or ""))
            for r in read_sheet(source, SHEET, required=False) if row_stage(r) != CODER_STAGE}


def start_review(target: str | Path, workbook: bytes) -> Path:
    """The run's spreadsheet saved where the coding will be kept. An existing file there is kept (it may hold
    coding), so the review continues it, but only when it is this run's spreadsheet: another run's is refused,
    never shown as this run's answers."""
    path = Path(target).expanduser()
    if path.suffix.lower() != ".xlsx":
        raise AppInputError(f"{path}: save the review as an .xlsx file")
    if path.exists():
        try:
            same = path.is_file() and _tool_answers(path) == _tool_answers(workbook)
        except Exception:  # noqa: BLE001 - openpyxl raises several types for a file that is not a workbook
            same = False
        if not same:
            raise AppInputError(f"{path} already exists and holds another run's answers (or is not a results "
                                "spreadsheet): give another file to keep this run's coding in, or open that one "
                                "under 'Continue a review'")
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with written_whole(path) as partial:
                partial.write_bytes(workbook)
        except OSError as error:
            raise AppInputError(f"{path}: cannot be written ({error.strerror or error}): give a file in a folder "
                                "you can write to") from None
    return path

