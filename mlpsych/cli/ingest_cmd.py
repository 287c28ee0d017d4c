"""`mlpsych ingest PAPERS_DIR --out texts.jsonl`: read and clean papers, write one Document per line to inspect or fix.

The JSONL it writes is accepted back by ``mlpsych run`` (and ``mlpsych ingest``), so a researcher can hand-correct
a badly extracted paper and feed the corrected text in. ``add_ingest_options``/``ingest_from_args`` give ``run``
the same ingestion switches.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from mlpsych.cli import check_output
from mlpsych.documents import Document
from mlpsych.errors import PapersNotInTexts, UserError
from mlpsych.ingest import CleaningOptions, backend_choices, load_documents, write_jsonl


def add_ingest_options(parser: argparse.ArgumentParser) -> None:
    """The shared ingestion switches: ``--pdf-backend`` and ``--no-clean STEP[,STEP]``."""
    group = parser.add_argument_group("ingestion")
    group.add_argument(
        "--pdf-backend",
        choices=backend_choices(),
        default="auto",
        help="PDF reader: Apache Tika (TIKA_SERVER_ENDPOINT or TIKA_APP_JAR), the embedded pdfium, "
        "or auto (Tika when configured and usable, else pdfium). Default: auto",
    )
    group.add_argument(
        "--no-clean",
        metavar="STEP[,STEP]",
        action="append",
        default=[],
        help=f"turn cleaning steps off ({', '.join(CleaningOptions.steps())}, or 'all'); repeatable (default: every "
        "step on)",
    )


def cleaning_from_args(args: argparse.Namespace) -> CleaningOptions:
    return CleaningOptions.disable(getattr(args, "no_clean", None) or [])


def ingest_from_args(args: argparse.Namespace, inputs: Path | str | Sequence[Path | str],
                     output: Path | None = None) -> list[Document]:
    """Documents for ``inputs`` with the options of :func:`add_ingest_options` (user mistakes are UserErrors);
    ``output``, the file the command writes, is not read from a folder."""
    return load_documents(
        inputs,
        pdf_backend=getattr(args, "pdf_backend", "auto"),
        cleaning=cleaning_from_args(args),
        progress=not (getattr(args, "quiet", False) or getattr(args, "no_progress", False)),
        exclude=output,
    )


def unread_papers_said(error: PapersNotInTexts, documents: Sequence[Document]) -> str:
    """``error`` with the reason for each of its papers that ``documents`` hold but could not read: a coded paper
    whose file failed (a PDF needing Tika in a shell without it) is then not taken for a paper of another corpus."""
    statuses = {d.id: d.status for d in documents if not d.ok}
    unread = [f"{paper} ({statuses[paper]})" for paper in error.papers if paper in statuses]
    if not unread:
        return str(error)
    return f"{error}; of them, --texts holds but could not read: {'; '.join(unread[:10])}"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="read and clean papers into a JSONL of texts",
        description="Read a folder of papers (PDF, DOCX, HTML, TXT, JSONL, text.json), clean the text and write one "
        "document per line, with its page map and a report of what cleaning removed.",
    )
    parser.add_argument("papers", nargs="+", metavar="PAPERS_DIR", help="folder of papers, or paper files")
    parser.add_argument("--out", "-o", default="texts.jsonl", help="output JSONL (default: texts.jsonl)")
    # --no-progress as run, adapt and dev train-reader spell it: a user who typed it got "unrecognized arguments"
    parser.add_argument("--quiet", "-q", "--no-progress", dest="quiet", action="store_true", help="no progress bars")
    add_ingest_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    inputs = [Path(p) for p in args.papers]
    out = Path(args.out)
    if out.suffix.lower() != ".jsonl":
        raise UserError(f"--out must end in .jsonl, got {out}")
    check_output(out)  # before the papers are read, not after: a corpus through Tika takes long
    documents = ingest_from_args(args, inputs[0] if len(inputs) == 1 else inputs, output=out)
    write_jsonl(documents, out)
    bad = [d for d in documents if not d.ok]  # each already logged as a warning with its status
    noted = [d for d in documents if d.ok and d.notes]  # logged too (pages without text): answers may miss them
    print(f"wrote {len(documents)} document(s) to {out}" + (f"; {len(bad)} could not be read" if bad else "")
          + (f"; {len(noted)} read with notes (pages without text, ...: said above, and in each one's meta)"
             if noted else ""))
    return 0 if len(bad) < len(documents) else 1
