"""What the Streamlit app does, as plain functions: the page (:mod:`mlpsych.app.page`) only lays out widgets and
calls these.

Keeping the logic here makes it unit-testable without a browser: file-name sanitizing and saving uploads,
question templates (load, fill the form from one, build one from the form, validate with the project's loader and
say what is wrong in plain words, save) and presets. The run is :mod:`mlpsych.app.runner` (its model check
:mod:`mlpsych.preflight`, its estimate :mod:`mlpsych.estimate`), the tables :mod:`mlpsych.app.results`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import textwrap
import unicodedata
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlpsych.errors import AppInputError, UserError
from mlpsych.questions import (
    PLACEHOLDER,
    QuestionFileError,
    QuestionSet,
    dump_question_set,
    library_names,
    load_question_set,
    parse_question_set,
)
from mlpsych.settings import PRESETS

if TYPE_CHECKING:
    from mlpsych.questions import QuestionTemplate
    from mlpsych.settings import RunSettings

# Streamlit enforces it per file, in MB: server.maxUploadSize of .streamlit/config.toml and of `mlpsych app`.
MAX_UPLOAD_MB = 200
MAX_NAME_LENGTH = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")



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
    """Write ``(name, content)`` pairs into ``folder`` under sanitized, unique names; unsupported files and files
    over the size limit are refused, not written. An empty file is written: reading it gives it the status
    ``empty file``, so it is listed with the other papers in the results and their spreadsheet."""
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
        if len(content) > max_bytes:
            saved.refused.append(f"{name}: larger than {max_bytes // (1024 * 1024)} MB")
            continue
        safe = unique_name(safe, taken)
        taken.add(safe.lower())
        target = folder / safe
        target.write_bytes(content)
        saved.paths.append(target)
    return saved


@dataclass(eq=False)
class UploadFolder:
    """A private temporary folder for one browser session's uploads, removed with the session's state (or when the
    app stops): a study's papers are not left on the server's disk after the page is closed."""

    path: Path = field(init=False)  # made here, never given: what this object removes is only what it made

    def __post_init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="mlpsych-uploads-"))
        weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)


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
    experimental: bool = True, based_on: QuestionTemplate | None = None,
) -> dict[str, Any]:
    """The template entry a form describes (models: one per line or comma-separated); validated on save.

    ``based_on``: the question the form started from; what the form does not show (LLM prompt, retrieval, answer
    length) is kept from it, so changing only the model makes a variant, not a poorer copy.
    """
    model_list = models if isinstance(models, list) else [m.strip() for m in re.split(r"[\n,]", models or "")]
    entry: dict[str, Any] = {"id": (id or "").strip(), "text": " ".join((text or "").split()), "kind": kind,
                             "models": [m for m in model_list if m], "top_k": int(top_k),
                             "allow_empty": bool(allow_empty), "merge": bool(merge), "experimental": experimental}
    if bridge_from and bridge_from.strip():
        entry["bridge_from"] = bridge_from.strip()
    if description and description.strip():
        entry["description"] = description.strip()
    if based_on is not None:
        hidden = based_on.model_dump(exclude_defaults=True, exclude={*entry, "bridge_from"})
        entry = {**hidden, **entry}
    return entry


# The loader's messages for mistakes a form can make, in the words of the form.
_PLAIN = [
    (r"field 'id': String should have at least", "give the question a short name (its id), e.g. sample_size"),
    (r"field 'id': String should match pattern", "the short name may hold only letters, digits and _ . - (no spaces)"),
    (r"field 'text': String should have at least", "type the question itself (a few words at least)"),
    (r"field 'models': List should have at least", "name at least one model, one per line"),
    (r"bridges from unknown question '([^']*)'", r"it follows up question '\1', which is not in this template"),
    (r"must contain __PLACEHOLDER__", "a follow-up question needs __PLACEHOLDER__ where the earlier answer goes"),
]


def plain_error(message: str) -> str:
    """The loader's message for a form's mistake in plain words (any other message is kept as it is)."""
    for pattern, plain in _PLAIN:
        found = re.search(pattern, message)
        if found:
            return found.expand(plain)
    return message


def form_values(question: QuestionTemplate | None, default_models: list[str]) -> dict[str, Any]:
    """Every field of the question form (by widget key) filled from ``question``, or blank for a new one."""
    if question is None:
        return {"form_id": "", "form_text": "", "form_kind": "entity", "form_models": "\n".join(default_models[:1]),
                "form_top_k": 5, "form_allow_empty": True, "form_merge": True, "form_bridge": ""}
    return {"form_id": question.id, "form_text": question.text, "form_kind": question.kind,
            "form_models": "\n".join(question.models), "form_top_k": question.top_k,
            "form_allow_empty": question.allow_empty, "form_merge": question.merge,
            "form_bridge": question.bridge_from or ""}


def with_question(questions: QuestionSet, entry: dict[str, Any]) -> QuestionSet:
    """The set with a typed question added (or replacing one with its id), validated: to run it without saving."""
    return _validated({"name": questions.name or "questions", "description": questions.description,
                       "questions": [*_entries(questions, entry.get("id")), entry]}, questions.source or "questions")


def _entries(questions: QuestionSet, replaced: str | None) -> list[dict[str, Any]]:
    """The set's questions as file entries, less the one with id ``replaced``."""
    return [q.model_dump(exclude_defaults=True) | {"id": q.id, "text": q.text, "models": q.models}
            for q in questions.questions if q.id != replaced]


def _validated(raw: dict, source: str) -> QuestionSet:
    try:
        return parse_question_set(raw, source)
    except QuestionFileError as error:
        raise AppInputError(str(error)) from None


def template_path(name: str, folder: Path | None = None) -> Path:
    """The file a template called ``name`` is saved to (a safe name, always ``.yaml``)."""
    stem = Path(sanitize_filename(name or "", default="my-questions")).stem
    return (folder or templates_dir()) / f"{stem}.yaml"


def save_question(entry: dict[str, Any], path: Path, *, set_name: str | None = None,
                  context: QuestionSet | None = None) -> QuestionSet:
    """Add ``entry`` to the template file at ``path`` (replacing a question with the same id) and save it.

    A follow-up whose earlier question is not in the file brings it (and its own earlier ones) from ``context``,
    the template the form started from, so a variant of q4 saves without copying q1 by hand. The whole set is
    validated before anything is written and read back with the project's loader, so a saved file always loads
    in ``mlpsych run`` too.
    """
    kept: list[dict] = []
    name = set_name or path.stem
    description = ""
    if path.is_file():
        current = load_questions(path)
        kept = _entries(current, entry.get("id"))
        name, description = current.name or name, current.description
    bridge = entry.get("bridge_from")
    if bridge and context is not None and bridge in {q.id for q in context.questions}:
        have = {e["id"] for e in kept}
        kept += [e for e in _entries(context.select([bridge]), entry.get("id")) if e["id"] not in have]
    raw = {"name": name, "description": description, "questions": [*kept, entry]}
    checked = _validated(raw, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
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


def progress_labels(questions: QuestionSet, width: int = 48) -> dict[str, str]:
    """Question id -> its text cut to ``width`` characters: the progress line names what is being asked."""
    return {q.id: textwrap.shorten(q.text.replace(PLACEHOLDER, "…"), width, placeholder=" …")
            for q in questions.questions}


def question_label(question) -> str:
    text = question.text.replace(PLACEHOLDER, "…")
    return f"{question.id}: {text}" + (" (experimental)" if question.experimental else "")


# -- presets and settings ------------------------------------------------------------------------------------

def preset_choices() -> dict[str, str]:
    """Preset name -> one-line description, from ``mlpsych.settings.PRESETS``."""
    return {name: preset.description for name, preset in PRESETS.items()}


# What each preset is for, and what it costs on a machine without a GPU (benchmarks/README.md, end to end on this
# project's 2-core CPU: fast 30-90 s per paper, reference 5-12 min; paper reads about 28x fast's FLOPs).
def preset_label(name: str, gpu: bool) -> str:
    """The preset's line in the sidebar: what it is for and, on a machine without a GPU, what it costs there."""
    preset = PRESETS[name]
    label = f"{name}: {preset.purpose}"
    if gpu:
        return label + (" (GPU)" if name != "fast" else "")
    return f"{label} ({preset.cpu_cost})"


FAST_SMALL_READER = PRESETS["fast"].retrieval.cascade.model or ""  # the page's default for the small reader field


def build_run(questions: QuestionSet, preset: str, *, device: str = "auto", normalize: bool = True,
              max_sub_questions: int | None = None, small_reader: str | None = None) -> tuple[QuestionSet, RunSettings]:
    """Questions and settings for a run: the preset (models, windows) plus the page's device and LLM switch, and
    the small reader of a preset's cascade (a folder on this machine runs offline)."""
    from mlpsych.settings import build_settings, get_preset

    try:
        cascaded = get_preset(preset).retrieval.cascade.model is not None
        return build_settings(
            questions, preset,
            base={"llm": {"enabled": normalize}, "max_sub_questions": max_sub_questions, "reader": {"device": device}},
            given={"retrieval": {"cascade": {"model": small_reader}}} if small_reader and cascaded else None)
    except UserError as error:  # an unknown preset, or a value the settings refuse
        raise AppInputError(str(error).splitlines()[0]) from None


def has_accelerator() -> bool:
    """A GPU torch can use (CUDA or Apple's MPS): the LLM stage is on by default only then."""
    import torch

    return torch.cuda.is_available() or bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


LLM_OFF_NOTE = ("The LLM stage is off because this machine has no GPU: on a CPU it adds minutes per paper (and a "
                "model download of several GB on the first run). Without it you get the extracted snippets.")


# Shown under the page's message about missing models: the ways forward without a network.
LOCAL_MODELS_HELP = (
    "To use models already on this machine: write a question file whose `models:` are model folders (as "
    "`mlpsych dev tiny-models FOLDER` does) and give its path in the sidebar under 'Question file path'; or copy a "
    "Hugging Face cache folder (~/.cache/huggingface/hub) from a machine with internet.")
