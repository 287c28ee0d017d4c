"""Ingestion: a folder of papers in, cleaned :class:`~mlpsych.documents.Document` objects with page maps out.

``load_documents`` never raises for one bad file: an encrypted, corrupt, empty or image-only paper becomes a
Document with ``text == ""`` and a short human ``status``, and the other papers go on. It raises only for a
mistake about the whole input (missing folder, no papers in it, unknown or unusable backend).

``Document.meta`` carries ``backend`` (which reader produced the text), ``cleaning`` (what each cleaning step
removed, and under ``textnorm`` what the always-on normalization of :mod:`mlpsych.ingest.textnorm` changed),
``n_pages`` and ``warnings`` (e.g. non-UTF-8 text, pages without a text layer).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mlpsych.documents import Document
from mlpsych.errors import IngestError, InputError, one_line
from mlpsych.ingest.backends import PDF_BACKENDS, Backend, Tika, backend_choices, resolve_backend
from mlpsych.ingest.base import Extraction, lines_from_text
from mlpsych.ingest.clean import CleaningOptions, clean_pages
from mlpsych.ingest.formats import (
    CORPUS_KINDS,
    SUPPORTED_SUFFIXES,
    IdAllocator,
    check_pdf_end,
    check_pdf_header,
    discover,
    kind_of,
    read_head,
    read_jsonl,
    read_text_file,
    read_text_json,
    write_jsonl,
)
from mlpsych.ingest.textnorm import TextReport, normalize_lines, normalize_text

__all__ = [
    "CleaningOptions",
    "PDF_BACKENDS",
    "SUPPORTED_SUFFIXES",
    "backend_choices",
    "load_documents",
    "resolve_backend",
    "write_jsonl",
]

log = logging.getLogger(__name__)


def load_documents(
    inputs: Path | str | Sequence[Path | str],
    *,
    pdf_backend: str = "auto",
    cleaning: CleaningOptions | None = None,
    progress: bool = True,
    exclude: Path | None = None,
) -> list[Document]:
    """Read a folder (its supported files, sorted, not recursive), one file, or a list of files into Documents.

    PDFs go through ``pdf_backend``; DOCX/HTML/ODT/RTF always through Tika; .txt/.md are cleaned like PDF text
    (form feeds separate pages); .jsonl from ``mlpsych ingest`` and the MLPsych ``text.json`` are taken as they
    are (already clean, maybe hand-corrected). Ids are file stems made spreadsheet-safe and unique, or the keys.
    ``exclude`` is a file a folder's scan leaves out (unless named itself): the output the caller is about to write.
    """
    files = discover(inputs)
    explicit = _explicit_files(inputs)
    if exclude is not None:
        files = _without_output(files, exclude, explicit)
    options = cleaning or CleaningOptions()
    readers = _readers(resolve_backend(pdf_backend))
    copies = _copies(files)
    for reader in {id(r): r for r in readers.values()}.values():
        batch = [p for p in files if readers.get(kind_of(p) or "") is reader and p not in copies
                 and _precheck(p) is None]
        if batch:
            reader.prepare(batch, progress=progress)
    ids = IdAllocator()
    documents: list[Document] = []
    sources = frozenset(p.resolve() for p in files if kind_of(p) not in CORPUS_KINDS)
    for path in tqdm(files, desc="Reading papers", unit="file", disable=not progress or len(files) < 2):
        ids.last = None
        if path in copies:
            status = (f"a copy of {copies[path].name} (the same file, byte for byte): read once, as that paper; "
                      "remove one of the two")
            documents.append(_failed(ids.take(path.stem), path, status, kind_of(path) or "?"))
            continue
        try:
            documents.extend(_read_one(path, ids, options, readers, path in explicit, sources))
        except Exception as error:  # noqa: BLE001 - one broken file must not stop the other papers
            log.debug("unexpected failure reading %s", path, exc_info=True)
            doc_id = ids.last or ids.take(path.stem)  # the id this file had taken, not a renamed one
            documents.append(_failed(doc_id, path, f"ingest: {one_line(error)}", "?"))
    for document in documents:  # a file name that is not UTF-8 (unzipped from Windows) must not reach a writer
        document.source_path = document.source_path and normalize_text(document.source_path)
    bad = [d for d in documents if not d.ok]
    log.info("read %d document(s), %d with problems", len(documents), len(bad))
    for document in bad:
        log.warning("%s: %s", document.source_path or document.id, document.status)
    return documents


def _copies(files: list[Path]) -> dict[Path, Path]:
    """Papers that are byte for byte an earlier file of the list, each with that file: "paper (1).pdf", downloaded
    twice, or a link to a paper of the same folder, was read as a second paper and counted twice in the
    frequencies. Only files of one size are hashed; corpora (.jsonl, text.json) and empty files are never copies."""
    by_size: dict[int, list[Path]] = defaultdict(list)
    for path in files:
        try:
            size = path.stat().st_size
        except OSError:
            continue  # reported when it is read
        if size and kind_of(path) not in CORPUS_KINDS:
            by_size[size].append(path)
    copies: dict[Path, Path] = {}
    for group in (g for g in by_size.values() if len(g) > 1):
        first: dict[str, Path] = {}  # the paper of each content: a file before a link, "paper" before "paper (1)"
        for path in sorted(group, key=lambda p: (p.is_symlink(), len(p.name), p.name)):
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                continue
            if digest in first:
                copies[path] = first[digest]
            else:
                first[digest] = path
    return copies


def _readers(pdf_backend: str) -> dict[str, Backend]:
    """The backend for each kind of file that needs one: PDFs as asked, office formats always through Tika."""
    pdf = PDF_BACKENDS.get(pdf_backend)()
    return {"pdf": pdf, "tika": pdf if isinstance(pdf, Tika) else Tika()}


def _without_output(files: list[Path], output: Path, explicit: set[Path]) -> list[Path]:
    """``files`` without ``output`` found in a folder: `mlpsych ingest .` run twice read its own texts.jsonl back
    as papers, and wrote every paper twice (the second as "paper-2")."""
    target = output.expanduser().resolve()
    kept = [p for p in files if p in explicit or p.resolve() != target]
    if len(kept) < len(files):
        log.info("skipping %s: it is the output being written", output)
        if not kept:
            raise InputError(f"no papers to read: {output} is the output being written (name it to read it)")
    return kept


def _explicit_files(inputs: Path | str | Sequence[Path | str]) -> set[Path]:
    items = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    return {Path(item).expanduser() for item in items if Path(item).expanduser().is_file()}


def _precheck(path: Path) -> str | None:
    """A status for files that are empty, unreadable or (for .pdf) not PDFs, before any backend sees them."""
    try:
        head = read_head(path)
        if kind_of(path) == "pdf":
            check_pdf_header(head)
            check_pdf_end(path)
    except IngestError as error:
        return str(error)
    return None


def _read_one(
    path: Path,
    ids: IdAllocator,
    options: CleaningOptions,
    readers: dict[str, Backend],
    explicit: bool,
    sources: frozenset[Path] = frozenset(),
) -> list[Document]:
    """``sources``: the resolved paper files being read beside ``path`` (what a JSONL's records may come from)."""
    kind = kind_of(path)
    if kind == "jsonl":
        return _from_jsonl(path, ids, explicit, sources)
    if kind == "json":
        return _from_text_json(path, ids, explicit)
    doc_id = ids.take(path.stem)
    problem = _precheck(path)
    if problem is not None:
        return [_failed(doc_id, path, problem, kind or "?")]
    if kind is None:
        return [_failed(doc_id, path, f"unsupported file type {path.suffix or '(no extension)'!r}", "?")]
    if kind == "text":
        try:
            text, warnings = read_text_file(path)
        except IngestError as error:
            return [_failed(doc_id, path, str(error), "text")]
        paged = "\f" in text  # form feeds separate pages (pdftotext's output); without them there are none
        extraction = Extraction(lines_from_text(text.split("\f")), {"n_pages": text.count("\f") + 1} if paged else {},
                                paged=paged)
        if warnings:
            extraction.meta["warnings"] = warnings
        return [_cleaned(doc_id, path, extraction, options, "text")]
    reader = readers[kind]
    try:
        extraction = reader.extract(path, columns=options.columns)
    except IngestError as error:
        return [_failed(doc_id, path, str(error), reader.label())]
    return [_cleaned(doc_id, path, extraction, options, reader.label())]


def _cleaned(doc_id: str, path: Path, extraction: Extraction, options: CleaningOptions, backend: str) -> Document:
    textnorm = TextReport()  # always, whatever the options: see mlpsych.ingest.textnorm
    result = clean_pages(normalize_lines(extraction.pages, textnorm), options)
    result.report["textnorm"] = textnorm.as_dict()
    meta: dict[str, Any] = {"backend": backend, **extraction.meta}
    columns = meta.pop("columns", None)
    if options.columns and columns is not None:
        result.report["columns"] = columns
    meta["cleaning"] = result.report
    status = "ok" if result.text.strip() else "no text left after cleaning (try --no-clean all to see the raw text)"
    pages = result.pages if result.text and extraction.paged else []  # no page map: answers get no page number
    return Document(id=doc_id, text=result.text, pages=pages, source_path=str(path), meta=meta, status=status)


def _failed(doc_id: str, path: Path, status: str, backend: str) -> Document:
    return Document(id=doc_id, text="", pages=[], source_path=str(path), meta={"backend": backend}, status=status)


def _from_jsonl(path: Path, ids: IdAllocator, explicit: bool, sources: frozenset[Path] = frozenset()) -> list[Document]:
    if not explicit and _rows_of_another_kind(path):  # a run's answers written into the papers folder, say
        log.info("skipping %s: its rows are not texts (an object with an 'id', as `mlpsych ingest` writes)", path.name)
        return []
    try:
        documents = list(read_jsonl(path))
    except IngestError as error:
        return [_failed(ids.take(path.stem), path, str(error), "jsonl")]
    if not documents:
        return [_failed(ids.take(path.stem), path, "empty file", "jsonl")]
    if not explicit:
        documents = _without_read_twice(path, documents, sources)
    for document in documents:
        document.id = ids.take(document.id, sanitize=False)
        document.meta.setdefault("backend", "jsonl")
    return documents


def _without_read_twice(path: Path, documents: list[Document], sources: frozenset[Path]) -> list[Document]:
    """A folder's JSONL without the papers whose files the folder also holds: `mlpsych ingest .` then `mlpsych run
    .` read every paper twice, from its file and from texts.jsonl (the second copy as "paper-2"). The file wins:
    it is what the researcher dropped in; the JSONL's text is read when the JSONL is named itself."""
    def read_beside(document: Document) -> bool:
        if not document.source_path:
            return False
        source = Path(document.source_path).expanduser()  # as ingest was given it: absolute, or relative to its cwd
        bases = [Path("/")] if source.is_absolute() else [Path.cwd(), path.parent]
        return any((base / source).resolve() in sources for base in bases)

    beside = [read_beside(d) for d in documents]
    twice = [d for d, is_beside in zip(documents, beside) if is_beside]
    if twice:
        names = ", ".join(Path(d.source_path or "").name for d in twice[:5]) + (", ..." if len(twice) > 5 else "")
        log.warning("%s: %d of its %d papers are also files in this folder (%s): read once, from their files; name "
                    "%s alone to read the texts it holds", path.name, len(twice), len(documents), names, path.name)
    return [d for d, is_beside in zip(documents, beside) if not is_beside]


def _rows_of_another_kind(path: Path) -> bool:
    """A JSONL whose first row is an object without an 'id' holds no texts: the answers of ``mlpsych run --out
    papers/results.jsonl`` were read back as papers by the next run, each line a paper with a problem."""
    try:
        with path.open("rb") as handle:
            first = next((line for line in handle if line.strip()), b"")
        row = json.loads(first) if first else None
    except (OSError, ValueError):  # unreadable or broken: reported line by line as before
        return False
    return isinstance(row, dict) and "id" not in row


def _from_text_json(path: Path, ids: IdAllocator, explicit: bool) -> list[Document]:
    reports: dict[str, TextReport] = {}
    try:
        texts = read_text_json(path, reports)
    except IngestError as error:
        if not explicit:  # a folder of papers often holds other JSON (gold answers, settings): not a paper
            log.info("skipping %s: %s", path.name, error)
            return []
        return [_failed(ids.take(path.stem), path, str(error), "text.json")]
    return [
        Document(id=ids.take(key, sanitize=False), text=text, source_path=str(path),
                 meta={"backend": "text.json", "cleaning": {"textnorm": reports[key].as_dict()}})
        for key, text in texts.items()
    ]
