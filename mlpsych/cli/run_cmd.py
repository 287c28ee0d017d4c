"""`mlpsych run PAPERS --questions mlpsych --out results.xlsx`: the main job."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from mlpsych.cli import UserError

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
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    p.add_argument("--dtype", default="auto", help="auto, fp32, fp16 or bf16 for the readers")
    p.add_argument("--batch-size", type=int, default=8, help="windows read at once")
    p.add_argument("--stride", type=int, default=128, help="tokens shared by neighbouring windows")
    p.add_argument("--max-length", type=int, default=None, help="window length in tokens (default: model maximum)")
    p.add_argument("--no-normalize", action="store_true", help="skip the LLM normalization stage")
    p.add_argument("--llm", default=None, help="normalization model (Hub id or folder) instead of the template's")
    p.add_argument("--llm-device", default="auto")
    p.add_argument("--llm-quantization", choices=["8bit", "4bit"], default=None, help="bitsandbytes loading (CUDA)")
    p.add_argument("--max-sub-questions", type=int, default=None, help="cap on multi-hop sub-questions per paper")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--preset", choices=["paper", "fast"], default=None,
                   help="paper: every window, the templates' models (faithful); fast: retrieval on and one "
                        "base-size reader per question. Options given explicitly override the preset")
    p.add_argument("--read", choices=["all", "retrieve"], default=None,
                   help="all: read every window (the paper's behaviour); retrieve: read only the windows "
                        "that retrieval ranks best for each question (default: as the templates say)")
    p.add_argument("--retrieval", choices=["bm25", "dense"], default=None,
                   help="how windows are scored when retrieving (default: the template's, else bm25)")
    p.add_argument("--budget", type=int, default=None, help="windows read per question when retrieving")
    p.add_argument("--neighbours", type=int, default=None, help="also read this many windows beside each chosen one")
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


def settings_from_args(args: argparse.Namespace):
    from mlpsych.settings import ReaderSettings
    from mlpsych.settings import LLMSettings, RetrievalSettings, RunSettings, get_preset

    preset = getattr(args, "preset", None)
    retrieval = get_preset(preset).retrieval if preset else RetrievalSettings()
    overrides = {"read": getattr(args, "read", None), "mode": getattr(args, "retrieval", None),
                 "budget": getattr(args, "budget", None), "neighbours": getattr(args, "neighbours", None)}
    if overrides["budget"] is not None and overrides["budget"] < 1:
        raise ValueError(f"--budget {overrides['budget']}: read at least 1 window per question")
    if overrides["neighbours"] is not None and not 0 <= overrides["neighbours"] <= 4:
        raise ValueError(f"--neighbours {overrides['neighbours']}: use 0 to 4")
    if getattr(args, "no_entity_anchor", False):
        overrides["entity_anchor"] = False
    retrieval = RetrievalSettings.model_validate(
        retrieval.model_dump() | {k: v for k, v in overrides.items() if v is not None})
    return RunSettings(
        reader=ReaderSettings(stride=args.stride, max_length=args.max_length, batch_size=args.batch_size,
                              device=args.device, dtype=args.dtype),
        llm=LLMSettings(enabled=not args.no_normalize, model=args.llm, device=args.llm_device,
                        quantization=args.llm_quantization),
        retrieval=retrieval,
        max_sub_questions=args.max_sub_questions,
        preset=preset,
    )


def run(args: argparse.Namespace) -> int:
    from mlpsych.export import WRITERS, write_result
    from mlpsych.cli.ingest_cmd import ingest_from_args
    from mlpsych.models import ModelLoadError
    from mlpsych.engines import EngineError, get_engine
    from mlpsych.questions import QuestionFileError, load_question_sets

    if args.out.suffix.lower() not in WRITERS:
        raise UserError(f"--out {args.out}: use a .xlsx, .csv or .jsonl file name")
    try:
        engine = get_engine(args.engine, address=args.address, workers=args.workers)
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
        settings = settings_from_args(args)
    except ValueError as error:
        raise UserError(str(error).splitlines()[0]) from None
    if getattr(args, "preset", None):  # the preset's model substitutions (its retrieval is in the settings)
        from mlpsych.settings import get_preset, substitute_models

        questions = substitute_models(questions, get_preset(args.preset).model_substitutions)
    try:
        result = engine.run(questions, settings, documents, args.cache, progress=not args.no_progress)
    except ModelLoadError as error:
        raise UserError(f"{error} (finished work is kept in the cache)") from None
    except EngineError as error:
        raise UserError(str(error)) from None
    write_result(result, args.out)
    failed = [d for d in result.errors]
    answered = sum(1 for a in result.answers if a.final)
    print(f"{len(documents)} papers, {answered} answers -> {args.out}"
          + (f" ({len(failed)} papers with problems: see the status column)" if failed else ""))
    for warning in result.info.get("warnings", []):
        print(f"note: {warning}")
    return 0
