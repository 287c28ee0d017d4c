"""The readers that turn a file into an :class:`~mlpsych.ingest.base.Extraction`, behind one protocol and by name.

``--pdf-backend`` names one of :data:`PDF_BACKENDS` (or ``auto``); office formats (DOCX, HTML, ODT, RTF) always go
through Tika. A new backend (say GROBID) is one class with this protocol and one ``register`` line: the command
line's choices, ``auto`` and the error for an unknown name follow the registry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from mlpsych.errors import BackendUnavailable, IngestError, UnknownChoice
from mlpsych.ingest import tika
from mlpsych.ingest.base import Extraction
from mlpsych.ingest.pdf import extract_pdf
from mlpsych.registry import Registry

log = logging.getLogger(__name__)


class Backend(Protocol):
    """One way of reading files; made fresh for each ``load_documents`` call (it may hold a batch's results)."""

    name: str  # the value of --pdf-backend

    def label(self) -> str:
        """What ``Document.meta["backend"]`` records for a file it read."""

    def configured(self) -> bool:
        """True when the environment asks for this backend (``auto`` then prefers it, if usable)."""

    def unusable_reason(self) -> str | None:
        """None when it can read now, else a one-line reason (for errors and per-file statuses)."""

    def prepare(self, paths: Sequence[Path], *, progress: bool) -> None:
        """Work done once for all ``paths`` before they are read one by one (Tika: one JVM for the folder)."""

    def extract(self, path: Path, *, columns: bool) -> Extraction:
        """The lines of every page; :class:`IngestError` with a short status when the file cannot be read."""


PDF_BACKENDS: Registry[Callable[[], Backend]] = Registry("PDF backend")
FALLBACK = "pdfium"  # what ``auto`` reads PDFs with when no other backend is configured and usable


@PDF_BACKENDS.register("tika")
class Tika:
    """Apache Tika, as in the paper: a server (``TIKA_SERVER_ENDPOINT``) or a local jar run once in batch mode."""

    name = "tika"

    def __init__(self) -> None:
        self._results: dict[Path, Extraction | IngestError] = {}

    def label(self) -> str:
        return "tika-server" if tika.server_endpoint() else "tika-app"

    def configured(self) -> bool:
        return tika.configured()

    def unusable_reason(self) -> str | None:
        return tika.unusable_reason()

    def prepare(self, paths: Sequence[Path], *, progress: bool) -> None:
        self._results.update(tika.extract_many(paths, progress=progress))

    def extract(self, path: Path, *, columns: bool) -> Extraction:
        result = self._results.get(path) or IngestError(self.unusable_reason() or tika.NEEDS_TIKA)
        if isinstance(result, IngestError):
            raise result
        return result


@PDF_BACKENDS.register("pdfium")
class Pdfium:
    """The embedded PDFium (no Java), with per-character geometry for columns, margins and font sizes."""

    name = "pdfium"

    def label(self) -> str:
        return "pdfium"

    def configured(self) -> bool:
        return False

    def unusable_reason(self) -> str | None:
        return None

    def prepare(self, paths: Sequence[Path], *, progress: bool) -> None:
        """Nothing to do ahead: each PDF is read when its turn comes."""

    def extract(self, path: Path, *, columns: bool) -> Extraction:
        return extract_pdf(path, columns=columns)


def backend_choices() -> tuple[str, ...]:
    """What ``--pdf-backend`` accepts: ``auto`` and every registered backend, in registration order."""
    return ("auto", *PDF_BACKENDS.names())


def resolve_backend(name: str) -> str:
    """The registered backend a ``--pdf-backend`` value means; :class:`UnknownChoice` or
    :class:`BackendUnavailable` (one line) if it cannot be honoured.

    ``auto`` takes the first backend the environment configures (Tika: ``TIKA_SERVER_ENDPOINT`` or
    ``TIKA_APP_JAR``) that is usable, else :data:`FALLBACK`. ``tika`` also finds a jar at ``.tika/tika-app.jar``.
    """
    name = (name or "auto").lower()
    if name not in backend_choices():
        raise UnknownChoice(f"unknown PDF backend {name!r}; choose from {', '.join(backend_choices())}")
    if name != "auto":
        reason = PDF_BACKENDS.get(name)().unusable_reason()
        if reason is not None:
            raise BackendUnavailable(f"the {name} PDF backend cannot be used: {reason}")
        return name
    for candidate in PDF_BACKENDS:
        backend = PDF_BACKENDS.get(candidate)()
        if backend.configured():
            reason = backend.unusable_reason()
            if reason is None:
                return candidate
            log.warning("%s is configured but unusable (%s): reading PDFs with %s", candidate, reason, FALLBACK)
    return FALLBACK
