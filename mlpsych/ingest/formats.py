"""Which files are papers, what kind each is (by content, not only by name), ids, and the plain-text formats."""

from __future__ import annotations

import codecs
import json
import logging
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mlpsych.files import written_whole
from mlpsych.documents import Document
from mlpsych.errors import IngestError, InputError, one_line
from mlpsych.ingest.textnorm import TextReport, normalize_json, normalize_text, normalize_with_pages

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({".txt", ".md"})
PDF_SUFFIXES = frozenset({".pdf"})
TIKA_SUFFIXES = frozenset({".docx", ".doc", ".html", ".htm", ".xhtml", ".odt", ".rtf", ".epub"})
JSONL_SUFFIXES = frozenset({".jsonl"})
JSON_SUFFIXES = frozenset({".json"})
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | PDF_SUFFIXES | TIKA_SUFFIXES | JSONL_SUFFIXES | JSON_SUFFIXES
CORPUS_KINDS = frozenset({"jsonl", "json"})  # files that hold many papers' texts, not one paper


def kind_of(path: Path) -> str | None:
    """``"text"``, ``"pdf"``, ``"tika"``, ``"jsonl"``, ``"json"`` or None for an unsupported extension."""
    suffix = path.suffix.lower()
    for kind, suffixes in (
        ("text", TEXT_SUFFIXES),
        ("pdf", PDF_SUFFIXES),
        ("tika", TIKA_SUFFIXES),
        ("jsonl", JSONL_SUFFIXES),
        ("json", JSON_SUFFIXES),
    ):
        if suffix in suffixes:
            return kind
    return None


def discover(inputs: Path | str | Sequence[Path | str], *, log_skipped: bool = True) -> list[Path]:
    """The files to read: a folder's supported files (sorted, not recursive), one file, or a list of files.

    Raises :class:`~mlpsych.errors.InputError` with a one-line message for a missing path or a folder with no papers.
    In a folder, hidden files, unsupported extensions and README files are skipped with a log line (unless
    ``log_skipped`` is off: a check before the reading, which says them); files named explicitly are always read
    (an unsupported one becomes a document with a status).
    """
    if isinstance(inputs, (str, Path)):
        path = Path(inputs).expanduser()
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
        if path.is_dir():
            return _scan_folder(path, log_skipped)
        return [path]
    files: list[Path] = []
    for item in inputs:
        path = Path(item).expanduser()
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
        files.extend(_scan_folder(path, log_skipped) if path.is_dir() else [path])
    if not files:
        raise InputError("no input files given")
    return files


def _scan_folder(folder: Path, log_skipped: bool) -> list[Path]:
    files: list[Path] = []
    say = log.info if log_skipped else log.debug
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if path.name.startswith(".") or path.name.startswith("~$"):
            say("skipping hidden/temporary file %s", path.name)
        elif path.is_dir():
            say("skipping sub-folder %s (folders are not read recursively)", path.name)
        elif kind_of(path) is None:
            say("skipping %s: unsupported file type %r", path.name, path.suffix or "(none)")
        elif path.stem.lower() == "readme":
            say("skipping %s: a README describes the folder, it is not a paper", path.name)
        else:
            files.append(path)
    if not files:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise InputError(f"no papers found in {folder} (supported: {supported})")
    return files


# -------------------------------------------------------------------------------------------------------------- ids

_UNSAFE = re.compile(r"[^\w.\-]+")


def sanitize_id(name: str) -> str:
    """A document id safe in spreadsheets and file names: spaces and symbols to "_", no leading formula sign."""
    name = unicodedata.normalize("NFC", name)
    cleaned = _UNSAFE.sub("_", name).strip("_")
    cleaned = cleaned.lstrip("=+-@.")
    return cleaned[:120] or "doc"


class IdAllocator:
    """Hands out unique ids: a second "paper" becomes "paper-2" (and says so in the log)."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self.last: str | None = None  # the id handed out last: a file that fails after taking it keeps it

    def take(self, wanted: str, *, sanitize: bool = True) -> str:
        base = sanitize_id(wanted) if sanitize else (normalize_text(wanted) or "doc")
        candidate, n = base, 1
        while candidate.lower() in self._used:
            n += 1
            candidate = f"{base}-{n}"
        if candidate != base:
            log.warning("duplicate document id %r renamed to %r", base, candidate)
        self._used.add(candidate.lower())
        self.last = candidate
        return candidate


# ----------------------------------------------------------------------------------------------------------- sniffing


def unreadable(path: Path, error: OSError) -> IngestError:
    """The status of a file that cannot be opened. A link whose target is gone (a linked folder moved) is listed
    in its folder like a paper, so "No such file or directory" alone read as nonsense: say it is such a link."""
    if path.is_symlink() and not path.exists():
        return IngestError(f"a link to a file that is not there ({os.readlink(path)}): copy the paper into the "
                           "folder, or mend the link")
    return IngestError(f"cannot read file: {error.strerror or error}")


def read_head(path: Path, size: int = 1024) -> bytes:
    """First bytes of a file; IngestError for an unreadable or empty one."""
    try:
        with path.open("rb") as handle:
            head = handle.read(size)
    except OSError as error:
        raise unreadable(path, error) from None
    if not head:
        raise IngestError("empty file")
    return head


CORRUPT_PDF = "corrupt or unreadable PDF"  # how every backend's status for a broken PDF begins
TRUNCATED_PDF = f"{CORRUPT_PDF} (truncated: the file stops before the PDF's end; download or copy it again)"
PDF_TAIL = 1024  # where a PDF's end-of-file marker may lie (as in Acrobat), after any padding
PADDING = b"\0\t\n\x0c\r "  # what some servers and tools append to a whole PDF


def check_pdf_end(path: Path) -> None:
    """Raise a 'truncated' status for a PDF whose last bytes (padding aside) hold neither ``%%EOF`` nor ``startxref``:
    a download or copy broken off. Tika (PDFBox) read such a file's first pages as the whole paper, with status ok."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - 64 * PDF_TAIL))
            tail = handle.read().rstrip(PADDING)[-PDF_TAIL:]
    except OSError as error:
        raise unreadable(path, error) from None
    if b"%%EOF" not in tail and b"startxref" not in tail:
        raise IngestError(TRUNCATED_PDF)


def check_pdf_header(head: bytes) -> None:
    """Raise a 'not a PDF' status naming what the file looks like when ``%PDF-`` is missing."""
    if b"%PDF-" in head:
        return
    raise IngestError(f"not a PDF (it is {describe_bytes(head)})")


def describe_bytes(head: bytes) -> str:
    """Human words for what a file's first bytes show: a known signature, plain text or an unknown kind."""
    signatures = (
        (b"PK\x03\x04", "a ZIP archive: a DOCX or ODT file? give it its real extension"),
        (b"\x89PNG", "a PNG image"),
        (b"\xff\xd8\xff", "a JPEG image"),
        (b"GIF8", "a GIF image"),
        (b"{\\rtf", "RTF text"),
        (b"\xd0\xcf\x11\xe0", "an old MS Office file (.doc)"),
    )
    for magic, words in signatures:
        if head.startswith(magic):
            return words
    stripped = head.removeprefix(b"\xef\xbb\xbf").lstrip().lower()
    # a page saved by a browser or fetched from a DOI may open with a BOM, an XML prolog or a comment before <html>
    if stripped.startswith((b"<!doctype html", b"<html")) or (stripped.startswith(b"<") and b"<html" in stripped):
        return "HTML: a web page saved with a .pdf name?"
    # the bytes themselves are never shown: they mean nothing to a reader and may be anything
    text = head.decode("utf-8", errors="replace").rstrip("\ufffd")  # (a character cut at the end is fine)
    if text.strip() and all(ch.isprintable() or ch.isspace() for ch in text) and "\ufffd" not in text:
        return "plain text: a text file saved with a .pdf name?"
    return "binary content of an unknown kind"


# ------------------------------------------------------------------------------------------------------ text files


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _utf16_without_bom(head: bytes) -> str | None:
    """``"utf-16-le"``/``"utf-16-be"`` for a head whose every other byte is NUL (Latin-script text in UTF-16 saved
    without a BOM, as R's ``fileEncoding = "UTF-16LE"`` and .NET write it), else None: such a paper was refused
    as "binary content"."""
    half = len(head) // 2
    if half < 8:
        return None
    pairs = [(head[2 * k], head[2 * k + 1]) for k in range(half)]
    for encoding, zero, other in (("utf-16-le", 1, 0), ("utf-16-be", 0, 1)):
        if sum(p[zero] == 0 for p in pairs) >= 0.9 * half and not any(p[other] == 0 and p[zero] == 0 for p in pairs):
            return encoding
    return None


def _looks_binary(head: bytes) -> bool:
    """NUL bytes in a head that is not UTF-8 or UTF-16 text, or a head of many NULs: not a paper. A stray NUL in
    real text (a broken export) is left for :mod:`mlpsych.ingest.textnorm` to remove."""
    if b"\x00" not in head or head.startswith(_UTF16_BOMS):
        return False
    if head.count(b"\x00") > len(head) // 10:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")("surrogatepass").decode(head, final=False)  # the cut may split a char
    except UnicodeDecodeError:
        return True
    return False


def decode_utf8(data: bytes) -> str:
    """UTF-8 bytes as text (a BOM dropped): CESU-8 surrogates come through for textnorm to join; if the bytes are
    not UTF-8 at all, each invalid byte becomes U+FFFD."""
    try:
        return data.decode("utf-8-sig", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8-sig", "replace")


def read_text_file(path: Path) -> tuple[str, list[str]]:
    """Text of a .txt/.md file and warnings; non-UTF-8 bytes are decoded as Windows-1252 (and reported).

    Surrogates encoded in the bytes (CESU-8, Java's way of writing astral characters, or a UTF-16 half) are decoded
    as such, for :mod:`mlpsych.ingest.textnorm` to join or replace.
    """
    try:
        data = path.read_bytes()
    except OSError as error:
        raise unreadable(path, error) from None
    if not data.strip():
        raise IngestError("empty file")
    bomless = _utf16_without_bom(data[:4096]) if not data.startswith(_UTF16_BOMS) else None
    if bomless is None and _looks_binary(data[:4096]):
        raise IngestError(f"not a text file (it is {describe_bytes(data[:64])})")
    for encoding in (bomless, "utf-8-sig", "utf-16"):
        if encoding is None or (encoding == "utf-16" and not data.startswith(_UTF16_BOMS)):
            continue
        try:
            return data.decode(encoding, "surrogatepass"), []
        except UnicodeDecodeError:
            pass
    warning = "file is not valid UTF-8: decoded as Windows-1252 (check accented characters)"
    log.warning("%s: %s", path.name, warning)
    return data.decode("cp1252", errors="replace"), [warning]


def read_jsonl(path: Path) -> Iterable[Document]:
    """Documents written by ``mlpsych ingest`` (one ``Document.to_dict`` per line), maybe hand-corrected since."""
    try:
        handle = path.open("rb")
    except OSError as error:
        raise unreadable(path, error) from None
    with handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                data = json.loads(decode_utf8(raw))
                if not isinstance(data, dict) or "id" not in data:
                    raise ValueError("expected an object with an 'id'")
                document = _normalized_document(data)
            except (ValueError, TypeError, KeyError) as error:
                yield Document(
                    id=f"{path.stem}-line{number}",
                    text="",
                    source_path=str(path),
                    status=f"bad JSONL line {number}: {str(error).splitlines()[0][:120]}",
                )
                continue
            document.source_path = document.source_path or str(path)
            yield document


def _line(document: Document) -> str:
    """The document as one JSON line; one that cannot be written becomes a failed document with the reason."""
    try:
        return json.dumps(document.to_dict(), ensure_ascii=False) + "\n"
    except Exception as error:  # noqa: BLE001 - one paper must not lose the others
        status = f"export: {one_line(error)}"
        log.warning("%s: %s", document.id, status)
        failed = {"id": document.id, "text": "", "pages": [], "source_path": document.source_path, "meta": {},
                  "status": status}
        return json.dumps(failed, ensure_ascii=False, default=str) + "\n"


def write_jsonl(documents: Sequence[Document], out: Path) -> None:
    """The texts as ``mlpsych ingest`` writes them (read back by ``run``, ``eval --texts`` and ``adapt --texts``),
    written whole (:func:`mlpsych.files.written_whole`): an interrupted write leaves no half file, and of two
    ingests writing one ``--out`` at once the last to finish leaves its own texts."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with written_whole(out) as partial, partial.open("w", encoding="utf-8") as handle:
            for document in documents:
                handle.write(_line(document))
    except OSError as error:
        raise InputError(f"cannot write {out}: {error.strerror or error}") from None

def _normalized_document(data: dict[str, Any]) -> Document:
    """A JSONL line as a Document: text normalized with its page ranges moved along, every other string made safe."""
    document = Document.from_dict({**normalize_json({k: v for k, v in data.items() if k != "text"}),
                                   "text": data.get("text", "")})
    report = TextReport()
    document.text, document.pages = normalize_with_pages(document.text, document.pages, report)
    if report.changed:  # `mlpsych ingest` writes normalized text: this is what was added by hand since
        cleaning = document.meta.get("cleaning")
        document.meta["cleaning"] = {**(cleaning if isinstance(cleaning, dict) else {}), "textnorm": report.as_dict()}
    return document


def read_text_json(path: Path, reports: dict[str, TextReport] | None = None) -> dict[str, str]:
    """``{paper_id: text}`` from the MLPsych ``text.json`` (a JSON string holding JSON) or a plain JSON object.

    Ids and texts are normalized (:mod:`mlpsych.ingest.textnorm`); ``reports`` receives what changed, per id.
    """
    try:
        data: Any = json.loads(decode_utf8(path.read_bytes()))
        if isinstance(data, str):
            data = json.loads(data)
    except (OSError, ValueError) as error:
        raise IngestError(f"not a readable JSON file ({str(error).splitlines()[0][:120]})") from None
    if not isinstance(data, dict) or not data or not all(isinstance(v, str) for v in data.values()):
        raise IngestError("unrecognized JSON: expected the MLPsych text.json format {paper_id: text}")
    texts: dict[str, str] = {}
    for key, value in data.items():
        report = TextReport()
        paper_id = normalize_text(str(key))
        texts[paper_id] = normalize_text(value, report)
        if reports is not None:
            reports[paper_id] = report
    return texts
