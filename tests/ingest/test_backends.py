"""PDF backends by name: one protocol, one registry that the choices, ``auto`` and the errors follow."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from mlpsych.dev.synth import SynthPaper, render_pdf
from mlpsych.errors import IngestError, UnknownChoice
from mlpsych.ingest import PDF_BACKENDS, backend_choices, load_documents, resolve_backend
from mlpsych.ingest.base import Extraction, lines_from_text


class Outline:
    """A backend that reads every PDF as one fixed page, and refuses files named 'locked*'."""

    name = "outline"

    def __init__(self) -> None:
        self.prepared: list[Path] = []

    def label(self) -> str:
        return "outline-1.0"

    def configured(self) -> bool:
        return True

    def unusable_reason(self) -> str | None:
        return None

    def prepare(self, paths: Sequence[Path], *, progress: bool) -> None:
        self.prepared.extend(paths)

    def extract(self, path: Path, *, columns: bool) -> Extraction:
        if path.name.startswith("locked"):
            raise IngestError("locked by the outline backend")
        return Extraction(lines_from_text([f"Outline of {path.stem}. We used random forests."]), {"n_pages": 1})


@pytest.fixture
def outline(monkeypatch):
    """``Outline`` registered for one test only."""
    monkeypatch.setattr(PDF_BACKENDS, "_items", dict(PDF_BACKENDS._items))
    PDF_BACKENDS.register("outline")(Outline)
    return Outline


def test_the_registered_backends_are_the_choices():
    assert backend_choices() == ("auto", "tika", "pdfium")
    assert resolve_backend("pdfium") == "pdfium"
    with pytest.raises(UnknownChoice, match="unknown PDF backend 'grobid'; choose from auto, tika, pdfium"):
        resolve_backend("grobid")


def test_a_new_backend_is_one_registration(outline, tmp_path, monkeypatch):
    monkeypatch.delenv("TIKA_SERVER_ENDPOINT", raising=False)
    monkeypatch.delenv("TIKA_APP_JAR", raising=False)
    render_pdf(SynthPaper(title="A study", paragraphs=["We used random forests."]), tmp_path / "a.pdf")
    render_pdf(SynthPaper(title="B study", paragraphs=["We used lasso."]), tmp_path / "locked.pdf")
    assert backend_choices()[-1] == "outline"
    assert resolve_backend("auto") == "outline"  # configured and usable: auto takes it
    documents = {d.id: d for d in load_documents(tmp_path, pdf_backend="outline", progress=False)}
    assert documents["a"].text == "Outline of a. We used random forests."
    assert documents["a"].meta["backend"] == "outline-1.0"
    assert not documents["locked"].ok and documents["locked"].status == "locked by the outline backend"
    assert documents["locked"].meta["backend"] == "outline-1.0"  # a refused file keeps who refused it
