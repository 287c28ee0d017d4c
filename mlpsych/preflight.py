"""Before any paper is read: is every model of the run on this machine, or downloadable? Answered in seconds.

Without this check a run on a machine without the models read every paper, then failed at the first model load
(and with the LLM stage only after the readers). The app and the command line both ask it, from the pipeline's
plan (``run_models``), so every model of the run is checked, the small reader and the LLM included. Here each
model is looked up in the Hugging Face cache or on disk; a model that is in neither is downloadable only if the
Hub answers ``mlpsych.hub``'s single probe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mlpsych.hub import cached_config, is_local, offline_unless_reachable, unknown_to_hub
from mlpsych.progress import ProgressEvent

if TYPE_CHECKING:
    from mlpsych.questions import QuestionSet
    from mlpsych.settings import RunSettings

Where = Literal["folder", "cache", "download", "missing"]

# Download sizes (GB, the weights one run fetches) of the Hub models the library, presets and LLM default name,
# for when the Hub cannot be asked (offline): enough to say "about 1.7 GB" before a first run.
READER_SIZES_GB: dict[str, float] = {
    "deepset/deberta-v3-large-squad2": 1.7,
    "deepset/deberta-v3-base-squad2": 0.7,
    "ahotrod/albert_xxlargev1_squad2_512": 0.9,
    "ahotrod/electra_large_discriminator_squad2_512": 1.3,
    "deepset/roberta-large-squad2": 1.4,
    "deepset/roberta-base-squad2": 0.5,
    "deepset/electra-base-squad2": 0.4,
}
LLM_SIZES_GB: dict[str, float] = {
    "meta-llama/Meta-Llama-3-8B-Instruct": 16.0,
    "Qwen/Qwen2.5-0.5B-Instruct": 1.0,
}
KNOWN_SIZES_GB = {**READER_SIZES_GB, **LLM_SIZES_GB}


@dataclass(frozen=True)
class ModelCheck:
    """Where one model of the run comes from: a folder, the local Hub cache, a download, or nowhere."""

    model: str
    where: Where
    size_gb: float | None = None
    role: str = "reader"  # "reader" or "LLM", for the page's message
    unknown: bool = False  # missing because the Hub has no model of that id (a misspelt id), not because unreachable

    @property
    def size(self) -> str:
        return f"about {self.size_gb:g} GB" if self.size_gb else "size unknown"


def run_models(plan: list[ProgressEvent]) -> dict[str, str]:
    """Every model a run loads (``model -> "reader" | "LLM"``), from the pipeline's plan: no defaults known here."""
    return {e.model: "LLM" if e.stage == "normalize" else "reader" for e in plan}


def check_run(questions: QuestionSet, settings: RunSettings, cache_dir: Path | str | None = None) -> list[ModelCheck]:
    """Every model of a run (readers, the cascade's small reader, the LLM) checked, from the pipeline's plan."""
    from mlpsych.cache import ResultCache
    from mlpsych.pipeline import Pipeline

    cache = ResultCache(cache_dir)
    try:
        return check_models(run_models(Pipeline(questions, settings, cache, progress=False).plan(1)))
    finally:
        cache.close()


def check_model(model: str, role: str = "reader") -> ModelCheck:
    """Look ``model`` up without loading it; the Hub is probed at most once per process (``mlpsych.hub``)."""
    if is_local(model):
        folder = Path(model).expanduser()
        return ModelCheck(model, "folder" if (folder / "config.json").is_file() else "missing", None, role)
    if cached_config(model) is not None:
        return ModelCheck(model, "cache", KNOWN_SIZES_GB.get(model), role)
    if offline_unless_reachable(model):
        return ModelCheck(model, "missing", KNOWN_SIZES_GB.get(model), role)
    if unknown_to_hub(model):
        return ModelCheck(model, "missing", None, role, unknown=True)
    return ModelCheck(model, "download", KNOWN_SIZES_GB.get(model), role)


def check_models(models: dict[str, str]) -> list[ModelCheck]:
    """``model -> role`` checked in order."""
    return [check_model(model, role) for model, role in models.items()]


def download_note(checks: list[ModelCheck]) -> str | None:
    """Before a run: which models the first run downloads and how much, or None when all are here."""
    fetched = [c for c in checks if c.where == "download"]
    if not fetched:
        return None
    total = sum(c.size_gb or 0 for c in fetched)
    sizes = f"about {total:g} GB" if total else "size unknown"
    names = ", ".join(f"{c.model} ({c.size})" for c in fetched)
    return f"The first run downloads {len(fetched)} model(s), {sizes} in all: {names}. Later runs reuse them."


def missing_message(checks: list[ModelCheck]) -> str | None:
    """The plain message when some model is neither here nor downloadable; None when the run can start."""
    missing = [c for c in checks if c.where == "missing"]
    if not missing:
        return None
    lines = []
    for c in missing:
        if is_local(c.model):
            lines.append(f"- {c.role} {c.model}: no model folder there (a folder with config.json and weights)")
        elif c.unknown:
            lines.append(f"- {c.role} {c.model}: the Hugging Face Hub has no model of that id (check its spelling, "
                         "owner/name as on huggingface.co; a private model needs `hf auth login`)")
        else:
            lines.append(f"- {c.role} {c.model} ({c.size} to download): not on this machine, and the Hugging Face "
                         "Hub cannot be reached to download it")
    return ("The run did not start: these models are needed and not available.\n" + "\n".join(lines))


def models_here(candidates: list[str]) -> list[str]:
    """The candidates on this machine (a model folder or the local Hub cache) and the known Hub readers cached
    here, in that order: what a question form offers first. Never asks the Hub."""
    here = []
    for model in dict.fromkeys([*candidates, *READER_SIZES_GB]):
        local = is_local(model) and (Path(model).expanduser() / "config.json").is_file()
        if local or (not is_local(model) and cached_config(model) is not None):
            here.append(model)
    return here
