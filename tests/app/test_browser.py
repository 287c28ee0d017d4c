"""End to end in a real headless Chromium: `streamlit run app.py`, upload the example papers, run with tiny models,
see the table, download the XLSX and open it.

Needs Debian's ``chromium`` (``.ci/setup_browser.sh``) and Playwright for Python; skipped with the reason otherwise.
Playwright only drives the system browser (``executable_path``): no browser is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason=f"{CHROMIUM} missing: run .ci/setup_browser.sh (Debian's chromium package)"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None,
                       reason="Playwright for Python is not installed (pip install playwright; no browser download)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, server: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"streamlit exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"streamlit did not answer on {url} within {timeout:.0f} s")


@pytest.fixture
def server(tmp_path):
    """`streamlit run app.py` on a free localhost port, headless, no telemetry, with a private cache."""
    port = _free_port()
    env = {**os.environ, "MLPSYCH_CACHE": str(tmp_path / "cache"), "MLPSYCH_TEMPLATES": str(tmp_path / "templates"),
           "HF_HUB_OFFLINE": "1"}
    log = (tmp_path / "streamlit.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture
def q1_questions(tiny_questions, tmp_path) -> Path:
    """The tiny question file reduced to q1 (two tiny readers), so the run takes seconds."""
    from mlpsych.questions import dump_question_set, load_question_set

    path = tmp_path / "tiny-q1.yaml"
    dump_question_set(load_question_set(tiny_questions).select(["q1"]), path)
    return path


def test_upload_run_table_download_in_chromium(server, q1_questions, examples_dir, tmp_path):
    from openpyxl import load_workbook
    from playwright import sync_api

    papers = sorted((examples_dir / "papers").glob("*.txt"))
    shots = Path(os.environ.get("MLPSYCH_SCREENSHOTS", tmp_path))
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
            page.set_default_timeout(60_000)
            page.goto(server)
            page.get_by_role("heading", name="mlpsych: answers from papers").wait_for()

            def fill(label: str, value: str) -> None:
                box = page.get_by_role("textbox", name=label, exact=True)
                box.fill(value)
                box.press("Enter")
                page.wait_for_timeout(300)

            fill("Question file path (overrides the template)", str(q1_questions))
            page.get_by_text("Questions from the file in the sidebar").wait_for()
            page.get_by_text("fast: quick on a laptop CPU").click()
            page.get_by_text("Clean answer lists with the LLM").click()
            page.wait_for_timeout(500)

            page.locator("input[type=file]").first.set_input_files([str(p) for p in papers])
            page.get_by_text(f"{len(papers)} file(s) selected").wait_for()
            page.get_by_role("button", name="Run", exact=True).click()

            xlsx_button = page.get_by_role("button", name="Download XLSX (all sheets, coder columns)")
            xlsx_button.wait_for(timeout=240_000)
            summary = page.get_by_text(re.compile(r"^\d+ of \d+ answers$")).inner_text()
            shown, total = re.findall(r"\d+", summary)
            assert int(shown) > 0 and shown == total, summary
            # The table renders a moment after the summary above it: wait for it (fails after the timeout).
            page.locator('[data-testid="stDataFrame"]').first.wait_for(state="attached")
            page.set_viewport_size({"width": 1400, "height": 2200})  # the page scrolls inside its own container
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / "app-results.png"))

            with page.expect_download() as info:
                xlsx_button.click()
            target = tmp_path / "downloaded.xlsx"
            info.value.save_as(str(target))
        finally:
            browser.close()

    book = load_workbook(target)
    assert {"papers", "answers", "frequencies", "run"} <= set(book.sheetnames)
    answers = list(book["answers"].iter_rows(values_only=True))
    header, rows = answers[0], answers[1:]
    assert len(rows) == int(shown)
    col = {name: i for i, name in enumerate(header)}
    assert {r[col["paper_id"]] for r in rows} <= {p.stem for p in papers}
    assert all(r[col["question_id"]] == "q1" and r[col["page"]] == 1 and r[col["evidence"]] for r in rows)
    assert [r[0] for r in book["papers"].iter_rows(min_row=2, values_only=True)] == [p.stem for p in papers]
