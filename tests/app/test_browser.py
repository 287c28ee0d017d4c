"""End to end in a real headless Chromium: `streamlit run app.py`, upload the example papers, run with tiny models,
see the overview and the answers, filter, download the XLSX and open it; and the offline failure path, where a model
that is not on the machine stops the run in seconds with a plain message.

Screenshots of the main steps are kept as test artifacts under ``$MLPSYCH_ARTIFACTS`` (else the test's temporary
folder); ``app-finished-run.png`` there is the one the README shows (copied to docs/ after a visible change).

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
    """`streamlit run app.py` on a free localhost port, headless, no telemetry, with a private cache and temporary
    folder (``server_tmp``): when the server has stopped, no uploaded paper is left in it."""
    port = _free_port()
    server_tmp(tmp_path).mkdir()
    env = {**os.environ, "MLPSYCH_CACHE": str(tmp_path / "cache"), "MLPSYCH_TEMPLATES": str(tmp_path / "templates"),
           "HF_HUB_OFFLINE": "1", "TMPDIR": str(server_tmp(tmp_path))}
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
    assert not list(server_tmp(tmp_path).glob("mlpsych-uploads-*")), "the stopped app left uploaded papers on disk"


def server_tmp(tmp_path: Path) -> Path:
    return tmp_path / "server-tmp"


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where screenshots go: ``$MLPSYCH_ARTIFACTS`` (kept by CI) or the test's temporary folder, not the repository."""
    folder = Path(os.environ.get("MLPSYCH_ARTIFACTS") or tmp_path / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def browser():
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page.set_default_timeout(60_000)
    page.goto(url)
    page.get_by_role("heading", name="mlpsych: answers from papers").wait_for()
    return page


def fill(page, label: str, value: str) -> None:
    box = page.get_by_role("textbox", name=label, exact=True)
    box.fill(value)
    box.press("Enter")
    page.wait_for_timeout(300)


def use_question_file(page, path: Path) -> None:
    fill(page, "Question file path (overrides the template)", str(path))
    from playwright.sync_api import expect

    expect(page.get_by_role("combobox", name="Question template")).to_have_value(
        re.compile(r"\(question file in the sidebar\)$"))
    page.get_by_text("fast: quick on a laptop CPU").click()
    page.wait_for_timeout(500)
    from mlpsych.questions import load_question_set

    # the fast preset's small reader: one of the question file's own models (offline)
    fill(page, "Small reader of the fast preset (Hub id or folder)", load_question_set(path).questions[0].models[0])


def upload(page, papers: list[Path]) -> None:
    page.locator("input[type=file]").first.set_input_files([str(p) for p in papers])
    page.get_by_text(f"{len(papers)} file(s) selected").wait_for()


def llm_off(page) -> None:
    """The LLM stage off (the default without a GPU; on a GPU machine it is switched off here)."""
    box = page.get_by_role("checkbox", name="Clean answer lists with the LLM")
    if box.is_checked():
        page.get_by_text("Clean answer lists with the LLM").click()
        page.wait_for_timeout(500)


@pytest.fixture
def tiny_q1_q4(tiny_questions, tmp_path) -> Path:
    """The tiny question file reduced to q1 and its follow-up q4, so the run takes seconds."""
    from mlpsych.questions import dump_question_set, load_question_set

    path = tmp_path / "tiny-q1-q4.yaml"
    dump_question_set(load_question_set(tiny_questions).select(["q1", "q4"]), path)
    return path


def test_upload_run_results_download_in_chromium(server, browser, tiny_q1_q4, examples_dir, tmp_path, shots):
    from openpyxl import load_workbook

    papers = sorted((examples_dir / "papers").glob("*.txt"))
    page = open_page(browser, server)
    llm_off(page)
    use_question_file(page, tiny_q1_q4)
    upload(page, papers)
    page.screenshot(path=str(shots / "app-1-ready.png"))
    page.get_by_role("button", name="Run", exact=True).click()

    lines = watch_progress(page, timeout=240)
    kept = sorted(p.name for p in server_tmp(tmp_path).glob("mlpsych-uploads-*/run-1/*"))
    assert kept == [p.name for p in papers]  # while the session lasts (removed when the app stops: the fixture)
    estimates = [line for line in lines if " · " in line]  # the live estimate, read as the page shows it
    assert estimates, lines
    assert not [line for line in estimates if re.search(r"\babout 0 s left", line)], estimates  # work remained
    counted = [i for i, line in enumerate(estimates) if "sub-question" in line]
    # "estimating" until q4's follow-ups are counted (the last of q1's lines may already show a time: the count
    # arrives when q1 is answered), then a time left to the end, never "estimating" again.
    known = [i for i, line in enumerate(estimates) if "estimating" not in line]
    assert counted and known and known == list(range(known[0], len(estimates))) and known[0] <= counted[0], estimates
    assert any("answering q1" in line and "estimating the time left" in line for line in estimates[:known[0]])
    xlsx_button = page.get_by_role("button", name="Download all: XLSX (all sheets, coder columns)")
    xlsx_button.wait_for()
    summary = page.get_by_text(re.compile(r"^\d+ of \d+ answers$")).inner_text()
    shown, total = re.findall(r"\d+", summary)
    assert int(shown) > 0 and shown == total, summary
    page.get_by_text("One row per paper").wait_for()
    # The tables render a moment after the summary above them: wait for both (fails after the timeout).
    page.locator('[data-testid="stDataFrame"]').nth(1).wait_for(state="attached")
    page.wait_for_timeout(1000)
    page.get_by_text("One row per paper").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "app-finished-run.png"))
    page.set_viewport_size({"width": 1400, "height": 2400})  # the page scrolls inside its own container
    page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "app-2-results.png"))

    # a row picked in the table: its whole evidence sentence and page below it
    table = page.locator('[data-testid="stDataFrame"]').last
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the first row's selection box
    card = page.locator('[data-testid="stAlert"]', has_text="(no page number)")  # .txt papers: no made-up page
    card.wait_for()
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "app-3-evidence.png"))

    banner = page.locator('[data-testid="stAlert"]', has_text="Demo answers, not real ones")
    assert banner.count() == 1 and "random-weight" in banner.inner_text()  # the tiny models' answers are labelled
    with page.expect_download() as info:
        xlsx_button.click()
    assert info.value.suggested_filename == "results-DEMO-random-models.xlsx"
    target = tmp_path / "downloaded.xlsx"
    info.value.save_as(str(target))

    fill(page, "Contains (answer, evidence or technique)", "zzz-nothing-matches")
    page.get_by_text(f"0 of {total} answers").wait_for()
    page.get_by_role("button", name="Download filtered: XLSX (0 answers)").wait_for()
    page.screenshot(path=str(shots / "app-4-filtered.png"))

    book = load_workbook(target)
    assert {"papers", "answers", "frequencies", "run"} <= set(book.sheetnames)
    note = next(book["run"].iter_rows(min_row=2, max_row=2, values_only=True))
    assert note[0] == "NOTE" and note[1].startswith("demo answers: read by random-weight models")
    answers = list(book["answers"].iter_rows(values_only=True))
    header, rows = answers[0], answers[1:]
    assert len(rows) == int(shown)
    col = {name: i for i, name in enumerate(header)}
    assert {r[col["paper_id"]] for r in rows} <= {p.stem for p in papers}
    assert all(r[col["question_id"]] in ("q1", "q4") and r[col["page"]] is None and r[col["evidence"]] for r in rows)
    assert [r[0] for r in book["papers"].iter_rows(min_row=2, values_only=True)] == [p.stem for p in papers]


def watch_progress(page, timeout: float) -> list[str]:
    """The progress bar's text, read every 0.2 s until the run has finished (or failed): each distinct line once."""
    bar = page.locator('[data-testid="stProgress"]')
    finished = page.get_by_text(re.compile(r"^Finished in \d+"))
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not finished.count():
        try:
            text = bar.first.inner_text(timeout=1000) if bar.count() else ""
        except Exception:  # noqa: BLE001 - the bar is redrawn between reads
            text = ""
        if text and (not lines or lines[-1] != text):
            lines.append(text)
        page.wait_for_timeout(200)
    finished.wait_for(timeout=1000)
    return lines


def test_missing_model_fails_in_seconds_with_a_plain_message(server, browser, examples_dir, tmp_path, shots):
    questions = tmp_path / "hub.yaml"
    questions.write_text("questions:\n  - id: q1\n    text: Which methods were used?\n"
                         "    models: [mlpsych-test/no-such-reader-squad2]\n", encoding="utf-8")
    page = open_page(browser, server)
    llm_off(page)
    use_question_file(page, questions)
    upload(page, sorted((examples_dir / "papers").glob("*.txt"))[:2])
    started = time.monotonic()
    page.get_by_role("button", name="Run", exact=True).click()
    alert = page.locator('[data-testid="stAlert"]', has_text="The run did not start")
    alert.wait_for(timeout=30_000)
    seconds = time.monotonic() - started
    page.wait_for_timeout(1500)  # the page's own smooth scroll to the message
    page.screenshot(path=str(shots / "app-5-missing-model.png"))
    assert seconds < 5, f"the missing model took {seconds:.1f} s to report"
    demo = page.get_by_role("button", name="Run the tiny demo models on the same papers")
    for seen in (alert, demo):  # in view at 1400x1000 without the test scrolling (it was below the fold)
        box = seen.bounding_box()
        assert box and 0 <= box["y"] and box["y"] + box["height"] <= 1000, box
    message = alert.inner_text()
    assert "mlpsych-test/no-such-reader-squad2" in message and "cannot be reached to download it" in message
    page.get_by_role("button", name="Run the tiny demo models on the same papers").wait_for()
    page.get_by_text("Question file path", exact=False).first.wait_for()
    assert page.get_by_text(re.compile("^Finished in")).count() == 0
