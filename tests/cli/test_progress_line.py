"""The command line's overall progress line: the app's estimate, one line per stage into a file, live on a terminal."""

from __future__ import annotations

import io
import re
import time

from mlpsych.cli import main
from mlpsych.cli.progress_line import ProgressLine
from mlpsych.estimate import ProgressTracker
from mlpsych.models import DEMO_NOTE
from mlpsych.progress import ProgressEvent

Q1, Q4 = ("q1",), ("q4",)
PLAN = [ProgressEvent("read", Q1, "m", 0, 2, "paper"),
        ProgressEvent("read", Q4, "m", 0, 0, "sub-question", counted=False)]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_into_a_file_one_line_per_stage_estimating_until_the_follow_ups_are_counted():
    out = io.StringIO()
    with ProgressLine(ProgressTracker(PLAN), out) as line:
        for event in [ProgressEvent("read", Q1, "m", 0, 2, "paper", loading=True),
                      ProgressEvent("read", Q1, "m", 1, 2, "paper"), ProgressEvent("read", Q1, "m", 2, 2, "paper"),
                      ProgressEvent("read", Q4, "m", 0, 5, "sub-question", sizing=True),
                      ProgressEvent("read", Q4, "m", 3, 5, "sub-question"),
                      ProgressEvent("read", Q4, "m", 5, 5, "sub-question")]:
            line.update(event)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # loading q1, reading q1, reading q4: not one line per paper
    assert lines[0].startswith("[  0%] loading the reader for q1 · estimating the time left until q4's follow-ups")
    assert re.match(r"\[ *\d+%\] answering q1: paper 1 of 2 · estimating", lines[1])
    assert re.match(r"\[ *\d+%\] answering q4: sub-question 3 of 5 · about \d+ s left · \d+ s so far$", lines[2])
    assert "about 0 s left" not in out.getvalue()


def test_into_a_file_a_long_stage_adds_a_line_a_minute_with_how_far_it_is():
    """A large study's stage takes hours: its log said "paper 0 of 5000" and nothing more until the next stage."""
    now = [0.0]
    out = io.StringIO()
    with ProgressLine(ProgressTracker([ProgressEvent("read", Q1, "m", 0, 5000, "paper")]), out,
                      clock=lambda: now[0]) as line:
        for done in range(0, 5001, 10):
            now[0] = done * 0.9  # 0.9 s a paper: 75 minutes in all
            line.update(ProgressEvent("read", Q1, "m", done, 5000, "paper"))
    lines = out.getvalue().splitlines()
    assert 70 <= len(lines) <= 80  # one a minute, not one a paper
    assert lines[0].startswith("[  0%] answering q1: paper 0 of 5000")
    assert re.match(r"\[ *\d+%\] answering q1: paper 4\d\d\d of 5000 · about \d+ s left", lines[-1])


def test_on_a_terminal_the_line_is_rewritten_and_its_clock_ticks_between_events():
    out = Terminal()
    with ProgressLine(ProgressTracker(PLAN), out, tick=0.02) as line:
        line.update(ProgressEvent("read", Q1, "m", 0, 2, "paper", loading=True))
        written = len(out.getvalue())
        time.sleep(0.2)
        assert len(out.getvalue()) > written  # redrawn without a new event
    text = out.getvalue()
    assert "\n" not in text and text.count("\r") > 2 and text.endswith("\r")  # cleared for the end line


def test_run_prints_the_overall_line_and_ends_with_the_elapsed_time(examples_dir, tiny_questions, tmp_path, capsys):
    out = tmp_path / "r.csv"
    paper = sorted((examples_dir / "papers").glob("*.txt"))[0]
    assert main(["run", str(paper), "--questions", str(tiny_questions), "--only", "q1", "--out", str(out),
                 "--cache", str(tmp_path / "cache"), "--max-length", "256", "--stride", "64", "--no-normalize"]) == 0
    captured = capsys.readouterr()
    # one line per stage (into a file): the second reader's starts once it is loaded, with the first one's rate
    assert re.search(r"^\[ *\d+%\] answering q1: paper 0 of 1 \(reader 2 of 2\) · about \d+ s left · \d+ s so far$",
                     captured.err, re.M), captured.err
    end, note = captured.out.splitlines()
    assert re.fullmatch(rf"1 papers, \d+ answers -> {re.escape(str(out))} in \d+ s", end), end
    assert note == f"note: {DEMO_NOTE}"  # the tiny models' answers are labelled as such
