"""`mlpsych run PAPERS --questions mlpsych --out results.xlsx`: the main job."""

from __future__ import annotations

import argparse
import logging
import time
from contextlib import nullcontext
from pathlib import Path

from pydantic import ValidationError

from mlpsych.cli import UserError
from mlpsych.questions import QuestionSet
from mlpsych.settings import PRESETS, RunSettings, apply_preset

log = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    from mlpsych.cli.ingest_cmd import add_ingest_options

    p = subparsers.add_parser("run", help="answer the questions for every paper and write a spreadsheet",
                              description="Answer predetermined questions for a folder of papers.")
    p.add_argument("papers", type=Path, help="folder of papers (PDF, TXT, DOCX, HTML), a file, texts.jsonl or text.json")
    p.add_argument("--questions", default="mlpsych",
                   help="question file or library name; several separated by commas (default: mlpsych)")
    p.add_argument("--only", default=None, help="answer only these question ids, e.g. q1,q2 (bridges are added)")
    p.add_argument("--out", type=Path, default=Path("results.xlsx"), help="output .xlsx, .csv or .jsonl")
    p.add_argument("--cache", type=Path, default=None, help="cache folder (default: the per-user cache folder)")
    defaults = RunSettings()
    flag = _settings_flag(p, defaults)
    flag("--device", help="auto, cpu, cuda, cuda:N or mps")
    flag("--dtype", help="auto, fp32, fp16 or bf16 for the readers ($MLPSYCH_DTYPE sets what auto means)")
    flag("--batch-size", type=int, help="windows read at once (default: chosen per device and model)")
    flag("--stride", type=int, help="tokens shared by neighbouring windows")
    flag("--max-length", type=int, help="window length in tokens (default: the model's maximum)")
    p.add_argument("--no-normalize", action="store_true", help="skip the LLM normalization stage")
    flag("--llm", help="normalization model (Hub id or folder) instead of the template's")
    flag("--llm-device", help="auto, cpu, cuda, cuda:N or mps for the LLM")
    flag("--llm-quantization", choices=["8bit", "4bit"], help="bitsandbytes loading (CUDA)")
    flag("--max-sub-questions", type=int, help="cap on multi-hop sub-questions per paper (default: the template's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--preset", choices=list(PRESETS), default=None,
                   help="; ".join(f"{name}: {preset.description}" for name, preset in PRESETS.items())
                        + ". Options given explicitly override the preset")
    flag("--read", choices=["all", "retrieve"],
         help="all: read every window (the paper's behaviour); retrieve: read only the windows that retrieval "
              "ranks best for each question (default: as the templates say)")
    flag("--retrieval", choices=["bm25", "dense"],
         help="how windows are scored when retrieving (default: the template's, else bm25)")
    flag("--budget", type=int, help="windows read per question when retrieving (default: the template's)")
    flag("--neighbours", type=int, help="also read this many windows beside each chosen one")
    p.add_argument("--small-reader", default=None,
                   help="when retrieving, a small SQuAD2 reader (Hub id or folder) reads every window first and the "
                        "template's readers only where its answers weigh most (the fast preset's cascade); 'none' "
                        "turns the cascade off")
    p.add_argument("--adapted", action="append", default=[], metavar="DIR",
                   help="a reader written by `mlpsych adapt`: it answers every question it was adapted on, instead "
                        "of the question file's models (repeatable)")
    p.add_argument("--calibrator", default=None,
                   help="confidence calibrator written by `mlpsych calibrate` (default: the one shipped, fitted on "
                        "the development papers)")
    p.add_argument("--no-entity-anchor", action="store_true",
                   help="sub-questions score all windows instead of only those mentioning their entity")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: this process (default); ray: papers spread over a Ray cluster (docs/scale.md)")
    p.add_argument("--address", default=None,
                   help="Ray cluster to join: auto (this machine's cluster) or ray://HEAD:10001 (default: start one here)")
    p.add_argument("--workers", type=int, default=None,
                   help="Ray workers, each holding the models (default: one per GPU, else one per node)")
    add_ingest_options(p)
    p.set_defaults(func=run)


# Command-line flag (its argparse dest) -> (section of RunSettings, field). A flag left out keeps the settings'
# default (or the preset's): the settings objects are the one source of defaults, so the CLI never overrides
# a choice the library makes per device (the reader's batch size) with a constant of its own.
SETTING_FLAGS: dict[str, tuple[str | None, str]] = {
    "device": ("reader", "device"), "dtype": ("reader", "dtype"), "batch_size": ("reader", "batch_size"),
    "stride": ("reader", "stride"), "max_length": ("reader", "max_length"),
    "llm": ("llm", "model"), "llm_device": ("llm", "device"), "llm_quantization": ("llm", "quantization"),
    "read": ("retrieval", "read"), "retrieval": ("retrieval", "mode"), "budget": ("retrieval", "budget"),
    "neighbours": ("retrieval", "neighbours"), "max_sub_questions": (None, "max_sub_questions"),
}


def _settings_flag(parser: argparse.ArgumentParser, defaults: RunSettings):
    """``add_argument`` for a flag backed by a settings field: default None (not given), help showing the default."""

    def add(name: str, **kwargs) -> None:
        section, field = SETTING_FLAGS[name.lstrip("-").replace("-", "_")]
        default = getattr(getattr(defaults, section) if section else defaults, field)
        help_text = kwargs.pop("help", "")
        if default is not None and "default:" not in help_text:
            help_text += f" (default: {default})"
        parser.add_argument(name, default=None, help=help_text, **kwargs)

    return add


def settings_from_args(args: argparse.Namespace, questions: QuestionSet) -> tuple[QuestionSet, RunSettings]:
    """The run's questions and settings: the settings' defaults, the preset applied to both (``apply_preset``),
    then every flag given explicitly. A value the settings refuse is a ValueError naming the flag."""
    preset = getattr(args, "preset", None)
    settings = RunSettings()
    if preset:
        questions, settings = apply_preset(preset, questions, settings)
    data = settings.model_dump()
    for dest, (section, field) in SETTING_FLAGS.items():
        value = getattr(args, dest, None)
        if value is not None:
            (data[section] if section else data)[field] = value
    data["llm"]["enabled"] = not getattr(args, "no_normalize", False)
    if getattr(args, "no_entity_anchor", False):
        data["retrieval"]["entity_anchor"] = False
    if getattr(args, "calibrator", None):
        data["answers"]["calibrator"] = args.calibrator
    small = getattr(args, "small_reader", None)
    if small is not None:
        data["retrieval"]["cascade"]["model"] = None if small.lower() == "none" else small
    try:
        return questions, RunSettings.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = first["loc"][-1]
        dest = next((d for d, (_, f) in SETTING_FLAGS.items() if f == field), str(field))
        raise ValueError(f"--{dest.replace('_', '-')} {first.get('input')}: {first['msg']}") from None


def run(args: argparse.Namespace) -> int:
    from mlpsych.cli.ingest_cmd import ingest_from_args
    from mlpsych.coding.adapt import AdaptError, use_adapted
    from mlpsych.coding.confidence import Calibrator
    from mlpsych.engines import EngineError, get_engine
    from mlpsych.estimate import format_seconds
    from mlpsych.export import WRITERS, write_result
    from mlpsych.models import DEMO_NOTE, ModelLoadError
    from mlpsych.questions import QuestionFileError, load_question_sets

    started = time.monotonic()
    if args.out.suffix.lower() not in WRITERS:
        raise UserError(f"--out {args.out}: use a .xlsx, .csv or .jsonl file name")
    try:
        get_engine(args.engine, address=args.address, workers=args.workers)  # a bad combination fails first
    except EngineError as error:
        raise UserError(str(error)) from None
    try:
        questions = load_question_sets([n for n in args.questions.split(",") if n]).select(
            [q for q in (args.only or "").split(",") if q])
    except QuestionFileError as error:
        raise UserError(str(error)) from None
    try:
        documents = ingest_from_args(args, args.papers)
    except (FileNotFoundError, ValueError) as error:
        raise UserError(str(error)) from None
    try:
        questions, settings = settings_from_args(args, questions)
    except ValueError as error:
        raise UserError(str(error).splitlines()[0]) from None
    try:
        questions = use_adapted(questions, args.adapted) if args.adapted else questions
    except AdaptError as error:
        raise UserError(str(error)) from None
    try:
        Calibrator.load(settings.answers.calibrator)  # a bad file fails now, not after the reading
    except ValueError as error:
        raise UserError(f"--calibrator: {error}") from None
    line = None if args.no_progress or args.engine != "local" else progress_line(questions, settings, documents,
                                                                                  args.cache)
    try:
        engine = get_engine(args.engine, address=args.address, workers=args.workers,
                            on_progress=line.update if line else None)
        with line or nullcontext():  # one overall line instead of the pipeline's bar per stage
            result = engine.run(questions, settings, documents, args.cache,
                                progress=not args.no_progress and line is None)
    except ModelLoadError as error:
        raise UserError(f"{error} (finished work is kept in the cache)") from None
    except EngineError as error:
        raise UserError(str(error)) from None
    write_result(result, args.out)
    failed = [d for d in result.errors]
    answered = sum(1 for a in result.answers if a.final)
    print(f"{len(documents)} papers, {answered} answers -> {args.out} in {format_seconds(time.monotonic() - started)}"
          + (f" ({len(failed)} papers with problems: see the status column)" if failed else ""))
    if result.info.get("demo_models"):
        print(f"note: {DEMO_NOTE}")
    for warning in result.info.get("warnings", []):
        print(f"note: {warning}")
    return 0


def progress_line(questions: QuestionSet, settings: RunSettings, documents: list, cache_dir: Path | None):
    """The run's overall progress line, sized by the pipeline's own plan for the papers that have text."""
    from mlpsych.cache import ResultCache
    from mlpsych.cli.progress_line import ProgressLine
    from mlpsych.estimate import ProgressTracker
    from mlpsych.pipeline import Pipeline

    cache = ResultCache(cache_dir)
    try:
        plan = Pipeline(questions, settings, cache, progress=False).plan(sum(d.readable for d in documents))
    finally:
        cache.close()
    return ProgressLine(ProgressTracker(plan))
