"""The run as coders read it on the page: one row per paper, the answers with their evidence, filters, downloads.

Every table comes from the exporter's rows (``mlpsych.export``), so the page shows what the spreadsheet holds, and
one filter record narrows both the table on the page and the "download filtered" file.
"""

from __future__ import annotations

import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from mlpsych.estimate import short_model

if TYPE_CHECKING:
    import pandas as pd

    from mlpsych.documents import Document
    from mlpsych.pipeline import RunResult

NO_ANSWER = "(no answer)"
NOT_READ = "(not read)"
RESULT_COLUMNS = ["paper", "question_id", "technique", "answer", "evidence", "page", "score", "stage", "models",
                  "question", "source_file"]


@dataclass(frozen=True)
class ResultFilter:
    """The page's filters: questions and papers (none chosen = all) and a text to find in an answer's fields."""

    questions: tuple[str, ...] = ()
    papers: tuple[str, ...] = ()
    text: str = ""

    @property
    def active(self) -> bool:
        return bool(self.questions or self.papers or self.text.strip())

    def keeps(self, paper: str, question_id: str, *fields: str | None) -> bool:
        """Whether a row passes; ``fields`` are searched for the text (answer, evidence, technique)."""
        if self.questions and question_id not in self.questions:
            return False
        if self.papers and paper not in self.papers:
            return False
        needle = self.text.strip().casefold()
        return not needle or any(needle in (f or "").casefold() for f in fields)


def results_table(result: RunResult) -> pd.DataFrame:
    """Final answers (and ungrounded LLM items, for review), one row each, with evidence sentence and page; a
    follow-up answer names the technique it was asked about."""
    import pandas as pd

    from mlpsych.export import answer_rows

    rows = [{**r, "paper": r["paper_id"], "technique": r["bridge_entity"] or "",
             "models": "+".join(short_model(m) for m in r["models"])}
            for r in answer_rows(result, final_only=True)]
    table = pd.DataFrame(rows, columns=RESULT_COLUMNS) if rows else pd.DataFrame(columns=RESULT_COLUMNS)
    table["page"] = table["page"].astype("Int64")  # page 3, not 3.0 beside an answer without a page
    return table


# What Streamlit's markdown would take for markup in a paper's text: CommonMark's and GFM's (emphasis, links, HTML,
# headings, list numbers, ~~), its math ($) and its emoji and colour shortcodes (:smile:, :red[...]).
_MARKUP = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~$:])")


def literal(text: object) -> str:
    """Text of a paper (or a template) for the page's markdown, every markup character escaped: shown as it was
    read, not "b*x + c*y" as "bx + cy" in italics, a "12. Results" sentence as a list, "$40 and $60" as math."""
    return _MARKUP.sub(r"\\\1", str(text))


def plain(message: object) -> str:
    """A message for the page's alerts and captions (a status, an error, a warning) shown as written: its markup
    escaped, since it holds paper ids, file names and model ids that a .jsonl, a coded sheet or a question file
    chose (an id ``![](https://host/pixel.png)`` rendered as markdown made the browser fetch that address), and
    each of its lines kept a line (markdown joins them)."""
    return "  \n".join(literal(line) for line in str(message).splitlines())


def evidence_card(row: dict) -> str:
    """One answer in full for the page (markdown): the question asked, the answer, and its evidence and page,
    wrapped, where the table cuts long sentences. A paper without pages (Word, a text file) names none."""
    import pandas as pd

    where = "no page number" if pd.isna(row["page"]) else f"page {row['page']}"
    return (f"**{literal(row['paper'])}**, {literal(row['question'])}\n\n**{literal(row['answer'])}** "
            f"({where})\n\n> {literal(row['evidence'])}")


def filter_results(table: pd.DataFrame, chosen: ResultFilter) -> pd.DataFrame:
    """The rows of the answers table that pass the filter."""
    keep = [chosen.keeps(r.paper, r.question_id, r.answer, r.evidence, r.technique) for r in table.itertuples()]
    return table[keep].reset_index(drop=True) if len(table) else table


def filtered_result(result: RunResult, chosen: ResultFilter) -> RunResult:
    """The run narrowed to what the filter keeps (for "download filtered"): the same test as the table's rows. A
    chosen follow-up brings the question it bridges from (to order and phrase it), not that question's answers."""
    if not chosen.active:
        return result
    documents = [d for d in result.documents if not chosen.papers or d.id in chosen.papers]
    questions = result.questions.select(list(chosen.questions)) if chosen.questions else result.questions
    bridge_only = frozenset(q.id for q in questions.questions if chosen.questions and q.id not in chosen.questions)
    answers = [a for a in result.answers if chosen.keeps(a.doc_id, a.question_id, a.text, a.evidence, a.bridge_entity)]
    return replace(result, documents=documents, questions=questions, answers=answers, bridge_only=bridge_only)


def overview_table(result: RunResult) -> pd.DataFrame:
    """One row per paper, one column per question (the spreadsheet's papers sheet), with an explicit
    '(no answer)' where a read paper got none, and '(not read)' for a paper that could not be read."""
    import pandas as pd

    from mlpsych.export import paper_questions, paper_rows

    unreadable = {d.id for d in result.documents if not d.ok or not d.text.strip()}
    ids = [q.id for q in paper_questions(result)]
    rows = []
    for row in paper_rows(result):
        empty = NOT_READ if row["paper_id"] in unreadable else NO_ANSWER
        rows.append({"paper": row["paper_id"], **{q: row[q] or empty for q in ids}, "status": row["status"]})
    return pd.DataFrame(rows, columns=["paper", *ids, "status"])


def status_table(result: RunResult) -> pd.DataFrame:
    """One row per paper: its file, pages, number of answers, ``ok`` or what went wrong, and what ingest noted of
    its text (pages without text)."""
    import pandas as pd

    from mlpsych.export import source_files

    counts: dict[str, int] = defaultdict(int)
    for a in result.answers:
        if a.final:
            counts[a.doc_id] += 1
    sources = source_files(result.documents)
    rows = [{"paper": d.id, "source_file": sources[d.id], "pages": len(d.pages) or None,
             "answers": counts[d.id], "status": "; ".join(result.errors.get(d.id, [])) or "ok",
             "text_notes": "; ".join(d.notes)}
            for d in result.documents]
    table = pd.DataFrame(rows, columns=["paper", "source_file", "pages", "answers", "status", "text_notes"])
    return table.astype({"pages": "Int64"})  # blank for a file without pages (Word, a text file), not 0 or nan


def duplicate_names(documents: list[Document]) -> list[str]:
    """Files that share a name in different formats (``x.pdf`` and ``x.txt``, read as ``x`` and ``x-2``): one
    line each for the page, since such pairs are often the same paper twice."""
    by_stem: dict[str, list[Document]] = defaultdict(list)
    for d in documents:
        by_stem[Path(d.source_path or d.id).stem.casefold()].append(d)
    return [" and ".join(Path(d.source_path or d.id).name for d in group)
            + " share a name: they are read as " + " and ".join(d.id for d in group)
            + " (remove one if they are the same paper)"
            for group in by_stem.values() if len(group) > 1]


def download_name(result: RunResult, suffix: str, filtered: bool = False) -> str:
    """The download's file name; a run of the random-weight demo models says so, so the file is never taken for
    real answers once it has left the page."""
    demo = "-DEMO-random-models" if result.info.demo_models else ""
    return f"results{'-filtered' if filtered else ''}{demo}{suffix}"


def downloads(result: RunResult, suffixes: tuple[str, ...] = (".xlsx", ".csv")) -> tuple[dict[str, bytes], list[str]]:
    """The run's files for the page's download buttons, and why any is not among them: a workbook past Excel's rows
    a sheet is refused by the exporter, and the page offers the CSV (it stopped with a traceback)."""
    from mlpsych.errors import OutputError

    files: dict[str, bytes] = {}
    problems: list[str] = []
    for suffix in suffixes:
        try:
            files[suffix] = download_bytes(result, suffix)
        except OutputError as error:
            problems.append(f"No {suffix.lstrip('.').upper()} download: {error}")
    return files, problems


def download_bytes(result: RunResult, suffix: str) -> bytes:
    """The run written by the project's exporter (same files as ``mlpsych run --out``) as bytes."""
    from mlpsych.errors import OutputError
    from mlpsych.export import write_result

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"results{suffix}"
        try:
            return write_result(result, path).read_bytes()
        except OutputError as error:  # said of the download, not of the page's own temporary file
            raise OutputError(str(error).removeprefix(f"{path}: ")) from None
