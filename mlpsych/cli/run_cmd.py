"""`mlpsych run PAPERS --questions mlpsych --out results.xlsx`: the main job."""

from __future__ import annotations

import argparse
import logging
import time
import types
import typing
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Literal


from mlpsych.cli import check_output, comma_list
from mlpsych.errors import EvalInputError, OutputError, SettingsError, UserError
from mlpsych.questions import QuestionSet
from mlpsych.settings import PRESETS, RunSettings, build_settings

if TYPE_CHECKING:
    from mlpsych.coding.keep import KeptCoding
    from mlpsych.pipeline import RunResult, Settled

log = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    from mlpsych.cli.ingest_cmd import add_ingest_options

    p = subparsers.add_parser("run", help="answer the questions for every paper and write a spreadsheet",
                              description="Answer predetermined questions for a folder of papers.")
    p.add_argument("papers", type=Path,
                   help="folder of papers (PDF, TXT, DOCX, HTML), a file, texts.jsonl or text.json")
    p.add_argument("--questions", default="mlpsych",
                   help="question file or library name; several separated by commas (default: mlpsych)")
    p.add_argument("--only", default=None,
                   help="answer only these question ids, e.g. q1,q2 (bridges are added; default: every question)")
    p.add_argument("--out", type=Path, default=Path("results.xlsx"),
                   help="output .xlsx, .csv or .jsonl (default: results.xlsx)")
    p.add_argument("--cache", type=Path, default=None, help="cache folder (default: the per-user cache folder)")
    defaults = RunSettings()
    flag = _settings_flag(p, defaults)
    for name in ("--device", "--dtype", "--runtime", "--batch-size", "--stride", "--max-length"):
        flag(name)
    p.add_argument("--no-normalize", action="store_true",
                   help="skip the LLM normalization stage (default: normalize the questions that ask for it)")
    for name in ("--llm", "--llm-device", "--llm-quantization", "--max-sub-questions"):
        flag(name)
    p.add_argument("--no-progress", action="store_true", help="no progress bars (default: progress shown)")
    p.add_argument("--preset", choices=list(PRESETS), default=None,
                   help="a named run configuration; options given explicitly override it (default: none, each "
                        "option's own default). "
                        + " ".join(f"{name}: {preset.description}" for name, preset in PRESETS.items()))
    for name in ("--read", "--retrieval", "--budget", "--neighbours"):
        flag(name)
    p.add_argument("--small-reader", default=None,
                   help="when retrieving, a small SQuAD2 reader (Hub id or folder) reads every window first and the "
                        "template's readers only where its answers weigh most (the fast preset's cascade); 'none' "
                        "turns the cascade off (default: the preset's small reader; none without a preset)")
    p.add_argument("--adapted", action="append", default=[], metavar="DIR",
                   help="a reader written by `mlpsych adapt`: it answers every question it was adapted on, instead "
                        "of the question file's models (repeatable; default: none, the question file's models)")
    p.add_argument("--calibrator", default=None,
                   help="confidence calibrator written by `mlpsych calibrate` (default: the one shipped, fitted on "
                        "the development papers)")
    p.add_argument("--no-entity-anchor", action="store_true",
                   help="sub-questions score all windows instead of only those mentioning their entity (default: "
                        "only those, when retrieving)")
    p.add_argument("--keep-coding", type=Path, default=None, metavar="CODED",
                   help="a coded results sheet (.xlsx or its .csv) whose coding the new sheet keeps: for each paper "
                        "and question coded in it (correct, corrected_answer or another coder column filled in, or "
                        "an answer a coder added), its rows as they are, coder columns and added rows included, "
                        "instead of this run's; a follow-up question (q4) asks about the coding's answers to the "
                        "question it follows where that is coded (the added and corrected ones, not those marked "
                        "wrong); a coded paper and question is not asked again (a question added to the file "
                        "is read alone), a paper with every question of this run coded not read at all; "
                        "coding of papers or questions this run does not have stays in CODED only (the summary "
                        "says how much); --out must be another file (default: none, every answer this run's)")
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
    "device": ("reader", "device"), "dtype": ("reader", "dtype"), "runtime": ("reader", "runtime"),
    "batch_size": ("reader", "batch_size"),
    "stride": ("reader", "stride"), "max_length": ("reader", "max_length"),
    "llm": ("llm", "model"), "llm_device": ("llm", "device"), "llm_quantization": ("llm", "quantization"),
    "read": ("retrieval", "read"), "retrieval": ("retrieval", "mode"), "budget": ("retrieval", "budget"),
    "neighbours": ("retrieval", "neighbours"), "max_sub_questions": (None, "max_sub_questions"),
}


def _settings_flag(parser: argparse.ArgumentParser, defaults: RunSettings):
    """``add_argument`` for a flag backed by a settings field, generated from the field: its description as the
    help, its type, its choices (a Literal), and its default shown (what None means, from the field); the flag's
    own default is None (not given), so the settings (or the preset) decide."""

    def add(name: str) -> None:
        section, field = SETTING_FLAGS[name.lstrip("-").replace("-", "_")]
        owner = getattr(defaults, section) if section else defaults
        info = type(owner).model_fields[field]
        default = getattr(owner, field)
        none = (info.json_schema_extra or {}).get("none", "none")
        union = typing.get_origin(info.annotation) in (typing.Union, types.UnionType)
        kinds = [k for k in (typing.get_args(info.annotation) if union else (info.annotation,)) if k is not type(None)]
        choices = [c for k in kinds if typing.get_origin(k) is Literal for c in typing.get_args(k)]
        kind = next((k for k in kinds if k in (int, float)), None)
        parser.add_argument(name, default=None, type=kind, choices=choices or None,
                            help=f"{info.description} (default: {none if default is None else default})")

    return add


def settings_from_args(args: argparse.Namespace, questions: QuestionSet) -> tuple[QuestionSet, RunSettings]:
    """The run's questions and settings: the settings' defaults, the preset applied to both (``apply_preset``),
    then every flag given explicitly. A value the settings refuse is a UserError naming the flag."""
    given: dict = {"reader": {}, "llm": {}, "retrieval": {}}
    for dest, (section, field) in SETTING_FLAGS.items():
        value = getattr(args, dest, None)
        if value is not None:
            (given[section] if section else given)[field] = value
    given["llm"]["enabled"] = not getattr(args, "no_normalize", False)
    if getattr(args, "no_entity_anchor", False):
        given["retrieval"]["entity_anchor"] = False
    if getattr(args, "calibrator", None):
        given["answers"] = {"calibrator": args.calibrator}
    small = getattr(args, "small_reader", None)
    if small is not None:
        given["retrieval"]["cascade"] = {"model": None if small.lower() == "none" else small}
    try:
        return build_settings(questions, getattr(args, "preset", None), given=given)
    except SettingsError as error:
        field = error.field.rsplit(".", 1)[-1]
        dest = next((d for d, (_, f) in SETTING_FLAGS.items() if f == field), field)
        raise UserError(f"--{dest.replace('_', '-')} {error.value}: {error.reason}") from None


def kept_coding_from_args(args: argparse.Namespace) -> KeptCoding | None:
    """The coding ``--keep-coding`` carries into the new sheet, read before any paper is. The new sheet goes to
    another file: CODED stays as its coders left it (a write over it that failed halfway would lose their work)."""
    from mlpsych.coding.keep import read_kept_coding

    coded: Path | None = getattr(args, "keep_coding", None)
    if coded is None:
        return None
    if coded.resolve() == args.out.resolve():
        raise UserError(f"--out {args.out} is the --keep-coding sheet: the new sheet, its coding kept, goes to another "
                        f"file (e.g. --out {coded.with_name(f'{coded.stem}-2{coded.suffix}')}); {coded} stays as its "
                        "coders left it")
    try:
        return read_kept_coding(coded)
    except EvalInputError as error:
        raise UserError(str(error)) from None


def check_not_coded(out: Path) -> None:
    """A results sheet a coder has begun to fill in is not written over: a rerun with the default --out results.xlsx
    replaced a coder's work without a word. Any cell a run does not write counts (``correct``, a second coder's
    ``correct_2``, a column of the coder's own), so no coder's work is lost to a rerun."""
    from mlpsych.coding.keep import coded_columns
    from mlpsych.evaluation.evaluate import read_sheet

    if out.suffix.lower() not in (".xlsx", ".csv") or not out.is_file():
        return
    try:
        rows = read_sheet(out, "answers", required=False)
    except EvalInputError:  # not a workbook: written over, as any other file
        return
    filled = [coded_columns(row) for row in rows]
    if coded := sum(map(bool, filled)):
        columns = ", ".join(dict.fromkeys(k for row in filled for k in row))
        raise UserError(f"--out {out}: {coded} of its answers are coded ({columns} filled in), and this run would "
                        f"write over them: give another --out file (the coded sheet is what mlpsych agree, adapt and "
                        f"calibrate read; --keep-coding {out} carries its coding into the new one)")


# Flags that only say how windows are retrieved (their dests, with the value that asks for nothing); of them, those a
# cascade does not use (its small reader decides how many windows, and which).
RETRIEVAL_FLAGS: dict[str, object] = {"retrieval": None, "budget": None, "neighbours": None, "small_reader": "none",
                                      "no_entity_anchor": False}
UNUSED_BY_CASCADE = ("budget", "neighbours")


def check_retrieval_flags(args: argparse.Namespace, questions: QuestionSet, settings: RunSettings) -> None:
    """A retrieval flag that would change nothing is refused: ignored, it read every window of every paper (minutes a
    paper) where ``--budget 2`` asked for two, or let the fast preset's cascade choose where it asked for a budget."""
    from mlpsych.retrieval.ranking import plan_for

    given = [dest for dest, idle in RETRIEVAL_FLAGS.items() if getattr(args, dest, None) not in (None, idle)]
    plans = [plan for q in questions.questions if (plan := plan_for(q.retrieval, settings.retrieval)) is not None]
    if not plans:
        unused, why = given, ("only where windows are retrieved, and this run reads every window of every paper: add "
                              "--read retrieve or --preset fast")
    elif all(plan.cascade is not None for plan in plans):
        unused, why = [d for d in given if d in UNUSED_BY_CASCADE], (
            "only without a cascade, and in this run a small reader chooses the windows: add --small-reader none")
    else:
        return
    refuse_unused(unused, why)


LLM_FLAGS = ("llm", "llm_device", "llm_quantization")  # flags of the LLM stage alone


def check_llm_flags(args: argparse.Namespace, questions: QuestionSet) -> None:
    """``--llm MODEL`` for questions none of which has a normalize: block is refused: it was ignored, and the run
    ended with the extractive answers alone where the researcher asked for an LLM's clean lists. (With
    --no-normalize the LLM is not used, as asked.)"""
    if not getattr(args, "no_normalize", False) and not any(q.normalize for q in questions.questions):
        refuse_unused([dest for dest in LLM_FLAGS if getattr(args, dest, None) is not None],
                      "only on questions with a normalize: block (the LLM's prompt), which none of this run's "
                      "questions has: add one")


def refuse_unused(dests: list[str], why: str) -> None:
    """One line naming the flags given that would change nothing, and why."""
    if dests:
        one = len(dests) == 1
        flags = ", ".join(f"--{dest.replace('_', '-')}" for dest in dests)
        raise UserError(f"{flags} {'acts' if one else 'act'} {why}, or leave {'it' if one else 'them'} out")


# The ways forward when models are missing, in the command line's words (the app has its own).
MISSING_MODELS_HELP = (
    "Ways forward: connect to the internet once (models download on the first run and are reused after); or use "
    "models already on this machine: a question file whose models: are model folders (--questions FILE), "
    "--small-reader FOLDER and --llm FOLDER (or --no-normalize); or try the whole pipeline offline with tiny "
    "random models: mlpsych dev tiny-models FOLDER, then --questions FOLDER/questions.yaml.")


def check_models(questions: QuestionSet, settings: RunSettings, cache: Path | None) -> None:
    """Every model of the run (readers, the cascade's small reader, the LLM) on this machine or downloadable, and
    the readers' runtime installed and their device and dtype usable here, before the first paper is read (a typo
    such as --device gpu stopped the run at the first model load, the whole folder read); all missing models named
    at once."""
    from mlpsych.models import ModelLoadError, pick_device, pick_dtype
    from mlpsych.preflight import check_run, download_note, missing_message

    try:
        if settings.reader.runtime == "onnxruntime":
            from mlpsych.onnx_runtime import import_onnxruntime

            import_onnxruntime()
        else:
            pick_dtype(settings.reader.dtype, pick_device(settings.reader.device), int8=True)
    except ModelLoadError as error:
        raise UserError(str(error)) from None
    checks = check_run(questions, settings, cache)
    missing = missing_message(checks)
    if missing:  # a misspelt Hub id alone needs its spelling checked, not a way to bring models here
        ways = any(c.where == "missing" and not c.unknown for c in checks)
        raise UserError(f"{missing}\n{MISSING_MODELS_HELP}" if ways else missing)
    note = download_note(checks)
    if note:
        log.info("%s", note)


def summary(result: RunResult, out: Path, seconds: float) -> list[str]:
    """The end of a run in a few lines: papers, answers, where they went, how long, and each paper's problem."""
    from mlpsych.estimate import format_seconds
    from mlpsych.models import DEMO_NOTE

    answered = sum(1 for a in result.answers if a.final)
    lines = [f"{len(result.documents)} papers, {answered} answers -> {out} in {format_seconds(seconds)}"
             + (f" ({len(result.errors)} papers with problems: see the status column)" if result.errors else "")]
    lines += _listed(result.errors, "papers with problems")
    if result.info.kept_coding:
        lines.append(result.info.kept_coding)
    noted = {d.id: d.notes for d in result.documents if d.notes and d.id not in result.errors}
    if noted:
        where = ", in the papers sheet's text_notes column" if out.suffix.lower() == ".xlsx" else ""
        papers = f"{len(noted)} paper" + ("" if len(noted) == 1 else "s")
        lines.append(f"{papers} read with notes on their text{where} (answers may be missing from what could not be "
                     "read):")
        lines += _listed(noted, "papers with notes")
    if result.info.demo_models:
        lines.append(f"note: {DEMO_NOTE}")
    lines += [f"note: {note}" for note in result.info.notes()]
    return lines


SHOWN_PROBLEMS = 10  # papers whose problem (or text's notes) the end summary names; all are in the papers sheet


def _listed(lines_of: dict[str, list[str]], what: str) -> list[str]:
    """The summary's lines for papers and what was said of each: the first thing said, and how many more."""
    lines = [f"  {doc_id}: {said[0]}" + (f" (and {len(said) - 1} more)" if len(said) > 1 else "")
             for doc_id, said in list(lines_of.items())[:SHOWN_PROBLEMS]]
    if len(lines_of) > SHOWN_PROBLEMS:
        lines.append(f"  ... and {len(lines_of) - SHOWN_PROBLEMS} more {what}")
    return lines


def run(args: argparse.Namespace) -> int:
    from mlpsych.cli.ingest_cmd import ingest_from_args
    from mlpsych.coding.adapt import AdaptError, use_adapted
    from mlpsych.coding.keep import keep_coding
    from mlpsych.engines import EngineError, get_engine
    from mlpsych.export import WRITERS, write_result
    from mlpsych.ingest import discover
    from mlpsych.models import ModelLoadError
    from mlpsych.pipeline.confidence import run_calibrators
    from mlpsych.questions import QuestionFileError, load_question_sets

    started = time.monotonic()
    if args.out.suffix.lower() not in WRITERS:
        raise UserError(f"--out {args.out}: use a .xlsx, .csv or .jsonl file name")
    check_output(args.out)
    kept = kept_coding_from_args(args)
    check_not_coded(args.out)
    try:
        get_engine(args.engine, address=args.address, workers=args.workers)  # a bad combination fails first
    except EngineError as error:
        raise UserError(str(error)) from None
    try:
        questions = load_question_sets(comma_list(args.questions)).select(comma_list(args.only))
    except QuestionFileError as error:
        raise UserError(str(error)) from None
    questions, settings = settings_from_args(args, questions)
    check_retrieval_flags(args, questions, settings)
    check_llm_flags(args, questions)
    try:
        questions = use_adapted(questions, args.adapted) if args.adapted else questions
    except AdaptError as error:
        raise UserError(str(error)) from None
    run_calibrators(settings, questions)  # the ones the run will use: a bad file fails now, not after the reading
    # A missing or empty folder is said before the models are looked for; what it skips is said when it is read.
    discover(args.papers, log_skipped=False)
    if args.engine == "local":  # a Ray cluster's nodes may hold models this machine does not
        check_models(questions, settings, args.cache)
    documents = ingest_from_args(args, args.papers)
    done = kept.papers_done([d.id for d in documents], [q.id for q in questions.questions]) if kept else set()
    to_read = [d for d in documents if d.id not in done]  # a paper coded for every question is not read again
    # the coded pairs of the others are not asked; follow-ups of a paper whose bridge question is coded ask about
    # the coding's answers, not the run's
    settled = kept.settles(questions.questions, [d.id for d in to_read]) if kept else None
    line = None if args.no_progress or args.engine != "local" else progress_line(questions, settings, to_read,
                                                                                  args.cache, settled)
    try:
        engine = get_engine(args.engine, address=args.address, workers=args.workers,
                            on_progress=line.update if line else None)
        with line or nullcontext():  # one overall line instead of the pipeline's bar per stage
            result = engine.run(questions, settings, to_read, args.cache,
                                progress=not args.no_progress and line is None, settled=settled)
    except ModelLoadError as error:
        raise UserError(f"{error} (finished work is kept in the cache)") from None
    except EngineError as error:
        raise UserError(str(error)) from None
    if kept:  # after the engine, whichever it is: the coded rows replace the run's, over every paper
        result = keep_coding(result, kept, documents)
    try:
        write_result(result, args.out)
    except OutputError as error:
        raise UserError(f"--out {error}; every answer is kept in the cache: rerun once it can be written (or with "
                        f"another --out), and nothing is computed again") from None
    print("\n".join(summary(result, args.out, time.monotonic() - started)))
    return 0


def progress_line(questions: QuestionSet, settings: RunSettings, documents: list, cache_dir: Path | None,
                  settled: Settled | None = None):
    """The run's overall progress line, sized by the pipeline's own plan for the papers that have text, less the
    (paper, question) pairs a kept coding settles (not asked)."""
    from mlpsych.cache import ResultCache
    from mlpsych.cli.progress_line import ProgressLine
    from mlpsych.estimate import ProgressTracker
    from mlpsych.pipeline import Pipeline

    cache = ResultCache(cache_dir)
    try:
        plan = Pipeline(questions, settings, cache, progress=False).plan([d.id for d in documents if d.readable],
                                                                          settled)
    finally:
        cache.close()
    return ProgressLine(ProgressTracker(plan))
