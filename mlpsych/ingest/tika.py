"""Apache Tika backend, as in the paper: a Tika server (``TIKA_SERVER_ENDPOINT``, through the ``tika`` package) or a
local ``tika-app`` jar (``TIKA_APP_JAR``) run once in batch mode over all files, so one JVM serves the whole folder.

Tika's XHTML keeps one ``<div class="page">`` per PDF page and one ``<p>`` per paragraph, which gives the cleaner
pages and paragraph breaks; it also reads DOCX, HTML, ODT and RTF.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mlpsych.errors import IngestError
from mlpsych.ingest.base import Extraction, Line
from mlpsych.ingest.formats import CORRUPT_PDF
from mlpsych.ingest.pdf import ENCRYPTED, NO_TEXT_LAYER

log = logging.getLogger(__name__)

NEEDS_TIKA = "this format needs Apache Tika: set TIKA_APP_JAR (a tika-app jar; needs Java) or TIKA_SERVER_ENDPOINT"
_REPO_JAR = Path(__file__).resolve().parents[2] / ".tika" / "tika-app.jar"


def find_tika_jar() -> Path | None:
    """``TIKA_APP_JAR`` if set (even when wrong: the caller reports it), else ``.tika/tika-app.jar`` here or in the repo."""
    env = os.environ.get("TIKA_APP_JAR")
    if env:
        return Path(env).expanduser()
    for candidate in (Path.cwd() / ".tika" / "tika-app.jar", _REPO_JAR):
        if candidate.is_file():
            return candidate
    return None


def server_endpoint() -> str | None:
    return os.environ.get("TIKA_SERVER_ENDPOINT") or None


def configured() -> bool:
    """True when the user asked for Tika through the environment (what ``--pdf-backend auto`` looks at)."""
    return bool(server_endpoint() or os.environ.get("TIKA_APP_JAR"))


def unusable_reason() -> str | None:
    """None when Tika can be used now, else a one-line reason (for errors and per-file statuses)."""
    endpoint = server_endpoint()
    if endpoint:
        return None if _server_alive(endpoint) else f"Tika server not reachable at {endpoint}"
    jar = find_tika_jar()
    if jar is None:
        return NEEDS_TIKA
    if not jar.is_file():
        return f"TIKA_APP_JAR points to a missing file: {jar}"
    if shutil.which("java") is None:
        return "the Tika jar needs Java, and no 'java' is on the PATH"
    return None


def _server_alive(endpoint: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(endpoint.rstrip("/") + "/tika", timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


def extract_many(paths: Sequence[Path], *, progress: bool = True) -> dict[Path, Extraction | IngestError]:
    """Read all ``paths`` with Tika (server if configured, else one batch run of the jar); one result per path."""
    if not paths:
        return {}
    reason = unusable_reason()
    if reason is not None:
        return {path: IngestError(reason) for path in paths}
    endpoint = server_endpoint()
    if endpoint:
        return {path: _server_extract(path, endpoint) for path in tqdm(paths, desc="Tika", disable=not progress)}
    return _batch_extract(list(paths), find_tika_jar(), progress)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------ server mode


def _server_extract(path: Path, endpoint: str) -> Extraction | IngestError:
    os.environ.setdefault("TIKA_CLIENT_ONLY", "True")  # never let the tika package download or start a server
    from tika import parser as tika_parser  # optional extra: pip install mlpsych[tika]

    try:
        parsed = tika_parser.from_file(
            str(path), serverEndpoint=endpoint, xmlContent=True, requestOptions={"timeout": 600}
        )
    except Exception as error:  # noqa: BLE001 - requests/tika raise many types; the file gets a status either way
        return IngestError(f"Tika server failed on this file ({type(error).__name__}: {str(error)[:100]})")
    status = parsed.get("status")
    if status not in (None, 200):
        return IngestError(
            f"Tika could not parse the file (HTTP {status}; encrypted or corrupt?)" if status == 422 else
            f"Tika server answered HTTP {status}"
        )
    metadata = parsed.get("metadata") or {}
    return _extraction_from(parsed.get("content") or "", metadata if isinstance(metadata, dict) else {})


# ------------------------------------------------------------------------------------------------------- batch mode


def _batch_extract(paths: list[Path], jar: Path, progress: bool) -> dict[Path, Extraction | IngestError]:
    """One ``java -jar tika-app.jar -J -x -i IN -o OUT`` run; inputs are linked under plain names (no odd characters)."""
    results: dict[Path, Extraction | IngestError] = {}
    with tempfile.TemporaryDirectory(prefix="mlpsych-tika-") as tmp:
        in_dir, out_dir = Path(tmp, "in"), Path(tmp, "out")
        in_dir.mkdir()
        out_dir.mkdir()
        names: dict[str, Path] = {}
        for k, path in enumerate(paths):
            name = f"{k:05d}{path.suffix.lower()}"
            _link(path.resolve(), in_dir / name)
            names[name] = path
        command = [
            "java",
            "-jar",
            str(jar),
            "-J",
            "-x",
            "-numConsumers",
            str(max(1, min(2, os.cpu_count() or 1))),
            "-timeoutThresholdMillis",
            "300000",
            "-i",
            str(in_dir),
            "-o",
            str(out_dir),
        ]
        log.info("Tika: parsing %d file(s) in one JVM (%s)", len(paths), jar.name)
        error = _run_with_progress(command, out_dir, len(paths), progress)
        for name, path in names.items():
            produced = out_dir / f"{name}.json"
            if not produced.is_file():
                results[path] = IngestError(f"Tika produced no output for this file{error}")
                continue
            results[path] = _read_batch_output(produced)
    return results


def _link(source: Path, target: Path) -> None:
    try:
        target.symlink_to(source)
    except OSError:
        shutil.copyfile(source, target)


def _run_with_progress(command: list[str], out_dir: Path, total: int, progress: bool) -> str:
    """Run the batch, advancing a progress bar as output files appear; '' or a note on how the run failed."""
    with tempfile.TemporaryFile() as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
        with tqdm(total=total, desc="Tika", unit="file", disable=not progress) as bar:
            while process.poll() is None:
                time.sleep(0.3)
                bar.update(len(list(out_dir.glob("*.json"))) - bar.n)
            bar.update(len(list(out_dir.glob("*.json"))) - bar.n)
        if process.returncode != 0:
            log_file.seek(0)
            tail = log_file.read()[-2000:].decode("utf-8", "replace")
            log.warning("Tika batch exited with %s: %s", process.returncode, tail.strip().splitlines()[-1:] or "")
            return f" (Tika exited with code {process.returncode})"
    return ""


def _read_batch_output(path: Path) -> Extraction | IngestError:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return IngestError(f"unreadable Tika output ({error})")
    if not isinstance(records, list) or not records or not isinstance(records[0], dict):
        return IngestError("Tika returned nothing for this file")
    container = records[0]  # the file itself; later records are embedded files (attachments, images)
    return _extraction_from(str(container.get("X-TIKA:content") or ""), container)


# ------------------------------------------------------------------------------------------------------ translation


def _extraction_from(xhtml: str, metadata: dict[str, Any]) -> Extraction | IngestError:
    content_type = str(_first(metadata.get("Content-Type")) or "")
    is_pdf = content_type.startswith("application/pdf")
    exception = str(metadata.get("X-TIKA:EXCEPTION:container_exception") or "")
    if exception:
        return IngestError(_exception_status(exception, is_pdf))
    pages = parse_xhtml(xhtml)
    extraction = Extraction(pages, {"n_pages": len(pages), "content_type": content_type} if is_pdf else
                            {"content_type": content_type}, paged=is_pdf)  # Word and HTML have no fixed pages
    parsers = metadata.get("X-TIKA:Parsed-By")
    if parsers:
        extraction.meta["tika_parser"] = _first(parsers[-1:] if isinstance(parsers, list) else parsers)
    if extraction.n_chars < 20:
        return IngestError(NO_TEXT_LAYER if is_pdf else "no text found in this file")
    return extraction


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


ENCRYPTED_FILE = "encrypted file: password required (save a copy without the password)"


def _exception_status(exception: str, is_pdf: bool) -> str:
    """A paper's status from Tika's exception, worded as pdfium's for the same fault: a coder filtering the papers
    sheet by status finds the corrupt PDFs whichever backend read them."""
    first = exception.strip().splitlines()[0] if exception.strip() else "unknown error"
    if "EncryptedDocumentException" in first or "password" in first.lower():
        return ENCRYPTED if is_pdf else ENCRYPTED_FILE
    if "ZeroByteFileException" in first:
        return "empty file"
    name = first.split(":", 1)[0].rsplit(".", 1)[-1]
    return f"{CORRUPT_PDF} (Tika: {name})" if is_pdf else f"Tika could not parse the file ({name})"


_BLOCKS = frozenset({"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr", "table", "ul", "ol", "blockquote"})
_SKIP = frozenset({"head", "script", "style", "title"})


class _XhtmlPages(HTMLParser):
    """Collect lines from Tika XHTML: page divs become pages; block elements and blank lines paragraph breaks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pages: list[list[Line]] = []
        self.outside: list[Line] = []  # text outside page divs (PDF bookmarks; the whole text of non-paged formats)
        self._div_depth = 0
        self._page_depth: int | None = None
        self._skip = 0
        self._buffer: list[str] = []
        self._pending_break = True

    def _target(self) -> list[Line]:
        return self.pages[-1] if self._page_depth is not None else self.outside

    def _flush(self, paragraph: bool) -> None:
        text = "".join(self._buffer)
        self._buffer.clear()
        target = self._target()
        pieces = text.split("\n")
        for k, piece in enumerate(pieces):
            if piece.strip():
                target.append(Line(piece.rstrip(), max(len(self.pages) - 1, 0), para_break=self._pending_break))
                self._pending_break = False
            elif 0 < k < len(pieces) - 1:
                self._pending_break = True
        if paragraph:
            self._pending_break = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip += 1
            return
        if tag == "div":
            self._div_depth += 1
            if ("class", "page") in attrs and self._page_depth is None:
                self._flush(True)
                self.pages.append([])
                self._page_depth = self._div_depth
                return
        if tag == "br":
            self._buffer.append("\n")
        elif tag in _BLOCKS:
            self._flush(True)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip = max(0, self._skip - 1)
            return
        if tag == "div":
            if self._page_depth == self._div_depth:
                self._flush(True)
                self._page_depth = None
            self._div_depth -= 1
        if tag in _BLOCKS:
            self._flush(True)

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._buffer.append(data)


def parse_xhtml(xhtml: str) -> list[list[Line]]:
    """Pages of lines from Tika's XHTML; formats without pages come back as one page."""
    parser = _XhtmlPages()
    parser.feed(xhtml)
    parser.close()
    parser._flush(True)
    if parser.pages:
        if parser.outside:
            log.debug("ignoring %d lines outside page divs (PDF bookmarks)", len(parser.outside))
        return [[Line(ln.text, k, para_break=ln.para_break) for ln in page] for k, page in enumerate(parser.pages)]
    return [[Line(ln.text, 0, para_break=ln.para_break) for ln in parser.outside]]
