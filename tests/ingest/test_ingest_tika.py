"""Real Apache Tika (tika-app jar in batch mode, one JVM for the folder) on the same papers as the pdfium tests.

Needs the jar: `.ci/fetch_tika.sh` puts it at `.tika/tika-app.jar` (or set TIKA_APP_JAR) and Java.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from mlpsych.dev.synth import SynthPaper, render_pdf
from mlpsych.ingest import load_documents, resolve_backend
from mlpsych.ingest.formats import TRUNCATED_PDF

from .conftest import paper, tika_jar
from .test_margins import stamped_paper
from .test_ingest_badfiles import CORRUPT_PDF_BYTES, cut_short, image_only_pdf

pytestmark = pytest.mark.slow

DOCX_BODY = "We used latent Dirichlet allocation (LDA) to find topics (Smith et al., 2019) in the essays."


def minimal_docx(path: Path, paragraphs: list[str]) -> None:
    """The smallest valid DOCX: content types, one relationship, and the document part."""
    ns = "http://schemas.openxmlformats.org/"
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(
            "[Content_Types].xml",
            f'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="{ns}package/2006/content-types">'
            f'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            f'<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
            f'wordprocessingml.document.main+xml"/></Types>',
        )
        zf.writestr(
            "_rels/.rels",
            f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{ns}package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{ns}officeDocument/2006/relationships/officeDocument" '
            f'Target="word/document.xml"/></Relationships>',
        )
        zf.writestr(
            "word/document.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{ns}wordprocessingml/2006/main">'
            f"<w:body>{body}</w:body></w:document>",
        )


@pytest.fixture(scope="module")
def tika_docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    jar = tika_jar()
    if jar is None:
        pytest.skip("no Tika jar: run .ci/fetch_tika.sh or set TIKA_APP_JAR")
    if shutil.which("java") is None:
        pytest.skip("Tika needs Java and no 'java' is on the PATH")
    folder = tmp_path_factory.mktemp("tika")
    render_pdf(paper(), folder / "paper.pdf")
    render_pdf(stamped_paper(), folder / "stamped.pdf")
    render_pdf(SynthPaper("Spaced", ["Random forests predicted well-being in the sample. " * 30] * 4),
               folder / "Ünïcode name with spaces.pdf")
    render_pdf(SynthPaper("Locked", ["Secret text. " * 50]), folder / "locked.pdf", encrypt_password="pw")
    (folder / "zero.pdf").write_bytes(b"")
    (folder / "corrupt.pdf").write_bytes(CORRUPT_PDF_BYTES)
    cut_short(folder / "paper.pdf", folder / "cut.pdf")
    image_only_pdf(folder / "scanned.pdf")
    (folder / "fake.pdf").write_text("just text pretending", encoding="utf-8")
    minimal_docx(folder / "essay.docx", ["Methods", DOCX_BODY, "We also used support vector machines (SVM)."])
    (folder / "page.html").write_text(
        "<html><head><title>T</title><script>var x = 1;</script></head><body><h1>Study</h1>"
        "<p>Participants wrote essays that we coded with a <b>random forest</b> classifier.</p></body></html>",
        encoding="utf-8",
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKA_APP_JAR", str(jar))
        mp.delenv("TIKA_SERVER_ENDPOINT", raising=False)
        assert resolve_backend("auto") == "tika"
        documents = load_documents(folder, pdf_backend="tika", progress=False)
    return {d.id: d for d in documents}


def test_tika_pdf_clean_and_in_order(tika_docs) -> None:
    document = tika_docs["paper"]
    assert document.ok, document.status
    assert document.meta["backend"] == "tika-app"
    text = document.text
    markers = [f"{word} paragraph {k}" for k in range(6) for word in ("Alpha", "Bravo", "Charlie", "Delta")]
    positions = [text.find(marker) for marker in markers]
    assert -1 not in positions and positions == sorted(positions)
    for leaked in ("Journal of Synthetic", "Labels and Bias", "Walker, P.", "(Smith et al., 2019)", "[12]"):
        assert leaked not in text
    assert "support vector machines (SVM)" in text
    assert len(document.pages) == document.meta["n_pages"] >= 3
    assert document.page_at(text.index("Delta paragraph 5")) == len(document.pages)


def test_tika_margin_notices_and_stamps_removed(tika_docs) -> None:
    # Tika reads the notices rotated up the margin a few letters per line, at the end of each page.
    stamped, plain = tika_docs["stamped"], tika_docs["paper"]
    assert stamped.text == plain.text
    report = stamped.meta["cleaning"]["margins"]
    assert report["notices"] >= 3 * stamped.meta["n_pages"] and report["stamps"] >= stamped.meta["n_pages"]


def test_tika_docx_and_html(tika_docs) -> None:
    docx = tika_docs["essay"]
    assert docx.ok, docx.status
    assert "We used latent Dirichlet allocation (LDA) to find topics in the essays." in docx.text
    assert "support vector machines (SVM)" in docx.text
    html = tika_docs["page"]
    assert html.ok and "random forest classifier" in html.text and "var x" not in html.text
    # Word and HTML have no fixed pages: an answer in them gets no page number, not a made-up page 1
    assert docx.page_at(docx.text.index("SVM")) is None and html.page_at(0) is None
    assert "n_pages" not in docx.meta and tika_docs["paper"].page_at(0) == 1


def test_tika_bad_files(tika_docs) -> None:
    assert tika_docs["locked"].status == "encrypted PDF: password required"
    assert tika_docs["zero"].status == "empty file"
    # worded as pdfium words it: filtering the papers sheet by status finds it whichever backend read it
    assert tika_docs["corrupt"].status.startswith("corrupt or unreadable PDF (Tika: ")
    assert tika_docs["cut"].status == TRUNCATED_PDF  # as pdfium's, and never the first pages read as the paper
    assert tika_docs["scanned"].status == "no text layer (scanned image?): run OCR first, e.g. ocrmypdf"
    assert tika_docs["fake"].status.startswith("not a PDF")
    spaced = tika_docs["Ünïcode_name_with_spaces"]
    assert spaced.ok and "Random forests predicted" in spaced.text
