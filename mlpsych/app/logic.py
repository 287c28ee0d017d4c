"""What the Streamlit app does, as plain functions: the page (``app.py``) only lays out widgets and calls these.

Keeping the logic here makes it unit-testable without a browser: file-name sanitizing and saving uploads,
question templates (load, build from a form, validate with the project's loader, save), presets, the run
itself (papers -> ``RunResult``, never raising for one bad paper), a progress tracker that estimates the
time left from measured progress, and the tables and downloads shown on the page.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpsych.questions import (
    PLACEHOLDER,
    QuestionFileError,
    QuestionSet,
    dump_question_set,
    library_names,
    load_question_set,
    parse_question_set,
)

if TYPE_CHECKING:
    import pandas as pd

    from mlpsych.documents import Document
    from mlpsych.pipeline import RunResult
    from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)

# Keep in step with server.maxUploadSize in .streamlit/config.toml (Streamlit enforces it per file, in MB).
MAX_UPLOAD_MB = 200
MAX_NAME_LENGTH = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class AppInputError(ValueError):
    """A user mistake the page shows as a one-line message (never a traceback)."""


# -- uploads -------------------------------------------------------------------------------------------------

def upload_suffixes() -> list[str]:
    """Extensions the uploader accepts: what ``load_documents`` can read, without the leading dot."""
    from mlpsych.ingest import SUPPORTED_SUFFIXES

    return sorted(s.lstrip(".") for s in SUPPORTED_SUFFIXES)


def sanitize_filename(name: str, *, default: str = "paper") -> str:
    """A safe file name for an uploaded paper: no folders, no ``..``, only ``A-Z a-z 0-9 . _ -``; extension kept.

    Browsers send a name chosen by the user's machine; it must never steer where the file is written.
    """
    base = re.split(r"[\\/]", name or "")[-1]  # drop any folder part, Windows or POSIX
    base = unicodedata.normalize("NFKD", base).encode("ascii", "ignore").decode("ascii")
    stem, dot, suffix = base.rpartition(".")
    if not dot:
        stem, suffix = base, ""
    suffix = _UNSAFE.sub("", suffix).lower()[:10]
    stem = _UNSAFE.sub("_", stem)
    stem = re.sub(r"\.{2,}", ".", stem).strip("._-")  # no "..", no hidden files, no leading dashes
    stem = re.sub(r"_{2,}", "_", stem) or default
    stem = stem[: MAX_NAME_LENGTH - len(suffix) - 1]
    return f"{stem}.{suffix}" if suffix else stem


def unique_name(name: str, taken: set[str]) -> str:
    """``name`` or ``stem-2.ext``, ``stem-3.ext`` ... so two uploads with the same name both survive."""
    if name.lower() not in taken:
        return name
    path = Path(name)
    n = 2
    while f"{path.stem}-{n}{path.suffix}".lower() in taken:
        n += 1
    return f"{path.stem}-{n}{path.suffix}"


@dataclass
class SavedUploads:
    """Where the uploaded papers were written, and the files refused (with the reason)."""

    paths: list[Path] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def save_uploads(files: Iterable[tuple[str, bytes]], folder: Path, *,
                 max_bytes: int = MAX_UPLOAD_MB * 1024 * 1024) -> SavedUploads:
    """Write ``(name, content)`` pairs into ``folder`` under sanitized, unique names; unsupported or empty files
    and files over the size limit are refused, not written."""
    folder.mkdir(parents=True, exist_ok=True)
    allowed = {f".{s}" for s in upload_suffixes()}
    taken = {p.name.lower() for p in folder.iterdir()}
    saved = SavedUploads()
    for name, content in files:
        safe = sanitize_filename(name)
        suffix = Path(safe).suffix.lower()
        if suffix not in allowed:
            saved.refused.append(f"{name}: unsupported file type (use one of: {', '.join(sorted(allowed))})")
            continue
        if not content:
            saved.refused.append(f"{name}: the file is empty")
            continue
        if len(content) > max_bytes:
            saved.refused.append(f"{name}: larger than {max_bytes // (1024 * 1024)} MB")
            continue
        safe = unique_name(safe, taken)
        taken.add(safe.lower())
        target = folder / safe
        target.write_bytes(content)
        saved.paths.append(target)
    return saved


def new_upload_folder() -> Path:
    """A private temporary folder for one browser session's uploads."""
    return Path(tempfile.mkdtemp(prefix="mlpsych-uploads-"))


def papers_in_folder(text: str) -> list[Path]:
    """The papers ``load_documents`` would read from a folder typed by the user; a one-line error otherwise."""
    from mlpsych.ingest import SUPPORTED_SUFFIXES

    raw = (text or "").strip().strip('"').strip("'")
    if not raw:
        raise AppInputError("type the path of a folder that holds the papers")
    folder = Path(raw).expanduser()
    if not folder.is_dir():
        raise AppInputError(f"{folder}: no such folder on this machine")
    papers = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES
                    and not p.name.startswith("."))
    if not papers:
        raise AppInputError(f"{folder}: no papers here (supported: {', '.join(sorted(SUPPORTED_SUFFIXES))})")
    return papers


# -- question templates -------------------------------------------------------------------------------------

def templates_dir() -> Path:
    """Where templates made in the app are saved: ``$MLPSYCH_TEMPLATES`` or a per-user data folder."""
    configured = os.environ.get("MLPSYCH_TEMPLATES")
    if configured:
        return Path(configured).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("mlpsych")) / "questions"


def template_choices() -> dict[str, str]:
    """Label shown -> name or path to load: the project's library first, then templates saved in the app."""
    choices = {f"{name} (library)": name for name in library_names()}
    folder = templates_dir()
    if folder.is_dir():
        for path in sorted(folder.glob("*.yaml")):
            choices[f"{path.stem} (mine)"] = str(path)
    return choices


def load_questions(source: str | Path) -> QuestionSet:
    """A template set by library name or file path; the loader's message becomes an AppInputError."""
    if not str(source).strip():
        raise AppInputError("choose a question template or give the path of a question file")
    try:
        return load_question_set(str(source).strip())
    except QuestionFileError as error:
        raise AppInputError(str(error)) from None


def question_fields(
    *, id: str, text: str, kind: str = "entity", models: str | list[str] = "", top_k: int = 5,
    allow_empty: bool = False, merge: bool = True, bridge_from: str = "", description: str = "",
    experimental: bool = True,
) -> dict[str, Any]:
    """The template entry a form describes (models: one per line or comma-separated); validated on save."""
    model_list = models if isinstance(models, list) else [m.strip() for m in re.split(r"[\n,]", models or "")]
    entry: dict[str, Any] = {"id": (id or "").strip(), "text": " ".join((text or "").split()), "kind": kind,
                             "models": [m for m in model_list if m], "top_k": int(top_k),
                             "allow_empty": bool(allow_empty), "merge": bool(merge), "experimental": experimental}
    if bridge_from and bridge_from.strip():
        entry["bridge_from"] = bridge_from.strip()
    if description and description.strip():
        entry["description"] = description.strip()
    return entry


def _validated(raw: dict, source: str) -> QuestionSet:
    try:
        return parse_question_set(raw, source)
    except QuestionFileError as error:
        raise AppInputError(str(error)) from None


def template_path(name: str, folder: Path | None = None) -> Path:
    """The file a template called ``name`` is saved to (a safe name, always ``.yaml``)."""
    stem = Path(sanitize_filename(name or "", default="my-questions")).stem
    return (folder or templates_dir()) / f"{stem}.yaml"


def save_question(entry: dict[str, Any], path: Path, *, set_name: str | None = None) -> QuestionSet:
    """Add ``entry`` to the template file at ``path`` (replacing a question with the same id) and save it.

    The whole set is validated before anything is written and read back with the project's loader, so a saved
    file always loads in ``mlpsych run`` too.
    """
    existing: list[dict] = []
    name = set_name or path.stem
    description = ""
    if path.is_file():
        current = load_questions(path)
        existing = [q.model_dump(exclude_defaults=True) | {"id": q.id, "text": q.text, "models": q.models}
                    for q in current.questions]
        name, description = current.name or name, current.description
    questions = [q for q in existing if q["id"] != entry.get("id")] + [entry]
    raw = {"name": name, "description": description, "questions": questions}
    checked = _validated(raw, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    dump_question_set(checked, path)
    return load_questions(path)


def remove_question(question_id: str, path: Path) -> QuestionSet | None:
    """Drop a question from a saved template; the file is deleted when it was the last one."""
    current = load_questions(path)
    rest = [q for q in current.questions if q.id != question_id]
    if not rest:
        path.unlink()
        return None
    checked = _validated({"name": current.name, "description": current.description,
                          "questions": [q.model_dump() for q in rest]}, str(path))
    dump_question_set(checked, path)
    return load_questions(path)


def check_template_text(text: str, source: str = "template") -> QuestionSet:
    """Validate YAML typed in the page exactly as a file would be: the loader's message on any problem."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{Path(sanitize_filename(source, default='template')).stem}.yaml"
        path.write_text(text or "", encoding="utf-8")
        try:
            return load_question_set(path)
        except QuestionFileError as error:
            raise AppInputError(str(error).replace(str(path), source)) from None


def save_template_text(text: str, path: Path) -> QuestionSet:
    """Save YAML typed in the page as a template file, only if it loads."""
    check_template_text(text, path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return load_questions(path)


def template_yaml(questions: QuestionSet) -> str:
    """A template set as the YAML text of a file (for the page's editor)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        dump_question_set(questions, path)
        return path.read_text(encoding="utf-8")


def question_label(question) -> str:
    text = question.text.replace(PLACEHOLDER, "…")
    return f"{question.id}: {text}" + (" (experimental)" if question.experimental else "")


# -- presets and settings ------------------------------------------------------------------------------------

def preset_choices() -> dict[str, str]:
    """Preset name -> one-line description, from ``mlpsych.settings.PRESETS``."""
    from mlpsych.settings import PRESETS

    return {name: preset.description for name, preset in PRESETS.items()}


def build_run(questions: QuestionSet, preset: str, *, device: str = "auto", normalize: bool = True,
              max_sub_questions: int | None = None) -> tuple[QuestionSet, RunSettings]:
    """Questions and settings for a run: the preset (models, windows) plus the page's device and LLM switch."""
    from mlpsych.reader import ReaderSettings
    from mlpsych.settings import LLMSettings, RunSettings, apply_preset

    try:
        base = RunSettings(reader=ReaderSettings(device=device), llm=LLMSettings(enabled=normalize),
                           max_sub_questions=max_sub_questions)
        return apply_preset(preset, questions, base)
    except ValueError as error:
        raise AppInputError(str(error).splitlines()[0]) from None


# -- progress and the time estimate --------------------------------------------------------------------------

@dataclass
class Step:
    """One stage of the run (a model reading every paper, or the LLM): its label and papers done / to do."""

    label: str
    total: int
    done: int = 0


def plan_steps(questions: QuestionSet, settings: RunSettings, n_papers: int) -> list[Step]:
    """The stages the pipeline will report, in order, each with the number of progress ticks expected.

    Mirrors the pipeline's labels: per question level, one stage per reader model (a tick per paper), then one
    normalization stage per LLM (a tick per paper and normalized question). Multi-hop levels are planned for
    every paper; the tracker shrinks a stage when the pipeline reports a smaller total.
    """
    from mlpsych.pipeline import question_levels

    steps: list[Step] = []
    for level in question_levels(questions):
        label = ",".join(q.id for q in level)
        for model in dict.fromkeys(m for q in level for m in q.models):
            steps.append(Step(f"{label} · {model}", n_papers))
        if settings.llm.enabled:
            per_llm: dict[str, int] = {}
            for q in level:
                if q.normalize:
                    llm = settings.llm.model or q.normalize.model or "meta-llama/Meta-Llama-3-8B-Instruct"
                    per_llm[llm] = per_llm.get(llm, 0) + n_papers
            steps += [Step(f"normalize · {llm}", n) for llm, n in per_llm.items()]
    return steps


class ProgressTracker:
    """Collects the pipeline's ``on_progress(stage, done, total)`` calls and estimates the time left.

    The estimate is measured, not guessed: seconds so far divided by steps done, times steps left. Until one
    step has finished there is no estimate. Loading a model counts in the first step of its stage, and cached
    steps are nearly free, so the estimate is rough early in a run and firms up as it goes.
    """

    def __init__(self, steps: list[Step], clock: Callable[[], float] = time.monotonic) -> None:
        self.steps = steps
        self.clock = clock
        self.started = clock()
        self.active = 0
        self.finished = False

    def update(self, label: str, done: int, total: int) -> None:
        index = self._find(label)
        for skipped in self.steps[self.active:index]:  # stages passed over had no (more) work
            skipped.total = skipped.done
        self.active = index
        step = self.steps[index]
        step.total = total
        step.done = max(step.done, min(done, total))

    def _find(self, label: str) -> int:
        if self.active < len(self.steps):
            current = self.steps[self.active]
            if current.label == label and current.done < current.total:
                return self.active
        for i in range(self.active, len(self.steps)):
            step = self.steps[i]
            if step.label == label and step.done < step.total and (i > self.active or step.done == 0):
                return i
        self.steps.append(Step(label, 0))  # a stage the plan did not foresee
        return len(self.steps) - 1

    def finish(self) -> None:
        self.finished = True
        for step in self.steps:
            step.total = step.done

    @property
    def done(self) -> int:
        return sum(s.done for s in self.steps)

    @property
    def total(self) -> int:
        return sum(s.total for s in self.steps)

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    def fraction(self) -> float:
        return 1.0 if self.finished or not self.total else min(1.0, self.done / self.total)

    def seconds_left(self) -> float | None:
        """Measured time per step so far times the steps left; None before the first step is done."""
        if self.finished:
            return 0.0
        if self.done == 0:
            return None
        return self.elapsed / self.done * max(0, self.total - self.done)

    def current(self) -> Step | None:
        return self.steps[self.active] if self.active < len(self.steps) else None

    def describe(self) -> str:
        """One line for the page: stage, paper count and the estimate with what it is based on."""
        step = self.current()
        where = f"{short_stage(step.label)}: paper {step.done} of {step.total}" if step else "starting"
        left = self.seconds_left()
        if left is None:
            estimate = "time left: measured after the first paper"
        else:
            estimate = (f"about {format_seconds(left)} left (measured: {self.done} of {self.total} steps "
                        f"in {format_seconds(self.elapsed)})")
        return f"{where} · {estimate}"


def short_model(model: str) -> str:
    """``/long/path/deberta-v2`` or ``deepset/deberta-v3-large-squad2`` -> the last part, for display."""
    return model.rstrip("/").split("/")[-1]


def short_stage(label: str) -> str:
    """``q1,q2 · /long/path/deberta-v2`` -> ``q1,q2 · deberta-v2`` for display."""
    head, sep, model = label.partition(" · ")
    return f"{head}{sep}{short_model(model)}" if sep else label


def format_seconds(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


# -- the run -------------------------------------------------------------------------------------------------

@dataclass
class RunOutcome:
    """What a run in the app produced: a result (possibly with per-paper errors) or one message for the page."""

    result: RunResult | None = None
    error: str | None = None
    documents: list[Document] = field(default_factory=list)
    seconds: float = 0.0


def run_papers(
    papers: list[Path] | Path,
    questions: QuestionSet,
    settings: RunSettings,
    *,
    cache_dir: Path | str | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
    on_documents: Callable[[list[Document]], None] | None = None,
    pdf_backend: str = "auto",
) -> RunOutcome:
    """Read the papers and answer the questions with the CLI's cache; never raises for a user-facing problem.

    One unreadable paper becomes a status on its row; a model that cannot be loaded, or an unexpected failure,
    becomes ``outcome.error`` (finished work stays in the cache).
    """
    from mlpsych.cache import ResultCache
    from mlpsych.ingest import load_documents
    from mlpsych.models import ModelLoadError
    from mlpsych.pipeline import Pipeline

    started = time.monotonic()
    outcome = RunOutcome()
    try:
        outcome.documents = load_documents(papers, pdf_backend=pdf_backend, progress=False)
        if on_documents:
            on_documents(outcome.documents)
        pipeline = Pipeline(questions, settings, ResultCache(cache_dir), progress=False, on_progress=on_progress)
        outcome.result = pipeline.run(outcome.documents)
    except (FileNotFoundError, ValueError) as error:
        outcome.error = str(error).splitlines()[0] if str(error) else type(error).__name__
    except ModelLoadError as error:
        outcome.error = f"{error} (finished work is kept in the cache)"
    except Exception as error:  # noqa: BLE001 - the page must stay alive and say what happened
        log.exception("run failed")
        outcome.error = f"the run stopped: {type(error).__name__}: {error}"
    outcome.seconds = time.monotonic() - started
    return outcome


# -- tables and downloads ------------------------------------------------------------------------------------

RESULT_COLUMNS = ["paper", "question_id", "answer", "evidence", "page", "score", "stage", "models", "question",
                  "source_file"]


def results_table(result: RunResult) -> pd.DataFrame:
    """Final answers (and ungrounded LLM items, for review), one row each, with evidence sentence and page."""
    import pandas as pd

    from mlpsych.export import answer_rows

    rows = [{**r, "paper": r["paper_id"], "models": "+".join(short_model(m) for m in r["models"])}
            for r in answer_rows(result, final_only=True)]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS) if rows else pd.DataFrame(columns=RESULT_COLUMNS)


def filter_results(table: pd.DataFrame, question_ids: list[str] | None = None,
                   papers: list[str] | None = None, text: str = "") -> pd.DataFrame:
    """Rows for the chosen questions and papers (none chosen = all) whose answer or evidence holds ``text``."""
    import pandas as pd

    mask = pd.Series(True, index=table.index)
    if question_ids:
        mask &= table["question_id"].isin(question_ids)
    if papers:
        mask &= table["paper"].isin(papers)
    needle = (text or "").strip().casefold()
    if needle:
        mask &= (table["answer"].fillna("").str.casefold().str.contains(needle, regex=False)
                 | table["evidence"].fillna("").str.casefold().str.contains(needle, regex=False))
    return table[mask].reset_index(drop=True)


def status_table(result: RunResult) -> pd.DataFrame:
    """One row per paper: its file, pages, number of answers and ``ok`` or what went wrong."""
    import pandas as pd

    counts: dict[str, int] = {}
    for a in result.answers:
        if a.final:
            counts[a.doc_id] = counts.get(a.doc_id, 0) + 1
    rows = [{"paper": d.id, "source_file": Path(d.source_path or "").name, "pages": len(d.pages),
             "answers": counts.get(d.id, 0), "status": "; ".join(result.errors.get(d.id, [])) or "ok"}
            for d in result.documents]
    return pd.DataFrame(rows, columns=["paper", "source_file", "pages", "answers", "status"])


def download_bytes(result: RunResult, suffix: str) -> bytes:
    """The run written by the project's exporter (same files as ``mlpsych run --out``) as bytes."""
    from mlpsych.export import write_result

    with tempfile.TemporaryDirectory() as tmp:
        path = write_result(result, Path(tmp) / f"results{suffix}")
        return path.read_bytes()
