"""Re-reading from the page: adapt a reader on the review's coding, then read the papers not coded yet with it.

The two steps are the command line's own (`mlpsych adapt`, then `mlpsych run --adapted --keep-coding`), run one after
the other in the background so the page stays usable and a closed page does not stop them; their output goes to a
log beside the spreadsheet. The re-read keeps the review's coding: its sheet holds the coded papers and questions as
coded and the adapted reader's answers for the rest, a follow-up (q4) asking about the coded answers of the question
it follows where those are coded, so the coder goes on in that one sheet. The page shows the same commands, for a
researcher who prefers to run them elsewhere.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mlpsych.app.review import ReviewSheet
from mlpsych.documents import Document
from mlpsych.ingest import write_jsonl
from mlpsych.questions import QuestionSet, dump_question_set

ADAPTING, READING, DONE, FAILED = "adapting", "reading", "done", "failed"


def run_inputs(sheet: Path) -> tuple[Path, Path]:
    """Where a review's run texts and questions are kept: beside its spreadsheet (``-texts.jsonl``,
    ``-questions.yaml``), so a review continued in a new session finds them."""
    stem = sheet.with_name(sheet.stem)
    return Path(f"{stem}-texts.jsonl"), Path(f"{stem}-questions.yaml")


def keep_run_inputs(sheet: Path, documents: list[Document], questions: QuestionSet) -> tuple[Path, Path]:
    """The run's texts and questions saved beside its review spreadsheet (:func:`run_inputs`), so the re-read
    adapts and reads on exactly what the run read, even when the papers were uploaded to the page."""
    texts, template = run_inputs(sheet)
    write_jsonl(documents, texts)
    dump_question_set(questions, template)
    return texts, template


@dataclass(frozen=True)
class RereadPlan:
    """The two commands' arguments (after ``mlpsych``) and where their results go."""

    adapt: list[str]
    run: list[str]
    reader_dir: Path
    results: Path
    log: Path
    uncoded: list[str]

    def commands(self) -> str:
        """The commands as a researcher would type them."""
        lines = [shlex.join(["mlpsych", *self.adapt]), shlex.join(["mlpsych", *self.run])]
        if self.uncoded:
            lines.append(f"# papers not coded yet: {', '.join(self.uncoded)}")
        return "\n".join(lines)


def plan_reread(review: ReviewSheet, reader: str, papers: str, *, questions: str = "mlpsych",
                normalize: bool = True, min_answers: int | None = None) -> RereadPlan:
    """Adapt ``reader`` on the coding of ``review`` (its papers in ``papers``: a folder, texts.jsonl or text.json)
    and re-read ``papers`` with the adapted reader for the questions it learnt, keeping the review's coding (a paper
    coded for every question is not read again); files go beside the spreadsheet."""
    stem = review.path.with_name(review.path.stem)
    reader_dir = Path(f"{stem}-adapted-reader")
    results = Path(f"{stem}-reread.xlsx")
    papers = papers or "PAPERS"
    adapt = ["adapt", "--reader", reader, "--texts", papers, "--coded", str(review.path), "--out", str(reader_dir),
             "--questions", questions, *(["--min-answers", str(min_answers)] if min_answers is not None else [])]
    run = ["run", papers, "--questions", questions, "--adapted", str(reader_dir), "--keep-coding", str(review.path),
           "--out", str(results)]
    if not normalize:
        run.append("--no-normalize")
    uncoded = [p for p, (coded, _) in review.coded_counts().items() if coded == 0]
    return RereadPlan(adapt, run, reader_dir, results, Path(f"{stem}-reread.log"), uncoded)


@dataclass(frozen=True)
class RereadStatus:
    stage: str  # ADAPTING, READING, DONE or FAILED
    message: str


class RereadJob:
    """The two commands of a plan, one after the other, in this Python's ``mlpsych``; ``poll`` moves it on."""

    def __init__(self, plan: RereadPlan) -> None:
        self.plan = plan
        self.plan.log.write_text("", encoding="utf-8")
        self.stage = ADAPTING
        self._process = self._start(plan.adapt)

    def _start(self, args: list[str]) -> subprocess.Popen:
        with self.plan.log.open("a", encoding="utf-8") as log:
            log.write(f"$ {shlex.join(['mlpsych', *args])}\n")
            log.flush()
            return subprocess.Popen([sys.executable, "-m", "mlpsych", *args], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)

    def poll(self) -> RereadStatus:
        """Where the job is; starts the reading once the adapted reader is written."""
        if self.stage in (ADAPTING, READING):
            code = self._process.poll()
            if code is not None and code != 0:
                self.stage = FAILED
            elif code == 0 and self.stage == ADAPTING:
                self.stage, self._process = READING, self._start(self.plan.run)
            elif code == 0:
                self.stage = DONE
        return RereadStatus(self.stage, self._message())

    def wait(self, timeout: float | None = None) -> RereadStatus:
        """Block until both commands have ended (for scripts and tests; the page polls instead)."""
        while self.poll().stage in (ADAPTING, READING):
            self._process.wait(timeout)
        return self.poll()

    def stop(self) -> None:
        if self.stage in (ADAPTING, READING):
            self._process.terminate()
            self.stage = FAILED

    def _message(self) -> str:
        if self.stage == ADAPTING:
            return f"Adapting the reader on this coding (log: {self.plan.log})"
        if self.stage == READING:
            return (f"Re-reading the papers not coded yet with the adapted reader {self.plan.reader_dir} (log: "
                    f"{self.plan.log})")
        if self.stage == DONE:
            return (f"Done: {self.plan.results} holds this coding and the adapted reader's answers for what was "
                    "not coded yet: continue the review in it")
        return f"The re-read stopped: {_last_error(self.plan.log)} (the whole output is in {self.plan.log})"


def _last_error(log: Path) -> str:
    """The command line's own one-line error, else the log's last line."""
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("mlpsych: ")]
    return (errors or lines or ["no output"])[-1]
