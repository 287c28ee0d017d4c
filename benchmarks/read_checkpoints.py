"""What checkpointing a long paper's read costs, and that it changes no answer: a thesis-length text (MLPsych papers
put end to end) read for q1-q3 of the mlpsych template (or those named), every window, by one reader, from an empty
cache each time: with checkpoints (every ``CHECKPOINT_SECONDS``), without, and interrupted by a SIGINT at 60% of
the read then rerun.

    python benchmarks/read_checkpoints.py --reader /work/readers/minilm-squad2 --data ../shared/mlpsych \\
        --work /work/scratch/s23-thesis

Prints the seconds of each run, the checkpoints written and what one cost (seconds, bytes), the windows the rerun
read, and whether all of them answered alike. Prints measurements, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from mlpsych.cache import ResultCache
from mlpsych.documents import Document
from mlpsych.pipeline import Pipeline
from mlpsych.pipeline.checkpoints import CachedCheckpoints
from mlpsych.progress import ProgressEvent
from mlpsych.questions import QuestionSet, load_question_set
from mlpsych.reading import checkpoint
from mlpsych.reading.reader import Reader
from mlpsych.settings import LLMSettings, RunSettings

SAVES: list[tuple[float, int]] = []  # (seconds, bytes) of each checkpoint written


def thesis(data: Path, chars: int) -> Document:
    """MLPsych papers end to end, in the order of their ids, until ``chars`` characters."""
    texts = json.loads(json.loads((data / "text.json").read_text()))
    parts, length = [], 0
    for key in sorted(texts):
        parts.append(texts[key])
        length += len(texts[key])
        if length >= chars:
            break
    return Document(id="thesis", text="\n\n".join(parts))


def questions(reader: str, ids: list[str]) -> QuestionSet:
    """Questions ``ids`` of the mlpsych template, read by ``reader`` alone, every window (no retrieval): a thesis's
    worst case."""
    source = load_question_set("mlpsych")
    asked = [q.model_copy(update={"models": [reader], "retrieval": None}) for q in source.questions if q.id in ids]
    return source.model_copy(update={"questions": asked})


def timed_saves() -> None:
    save = CachedCheckpoints.save

    def timed(self: CachedCheckpoints, call, state) -> None:
        started = time.perf_counter()
        save(self, call, state)
        SAVES.append((time.perf_counter() - started, len(json.dumps(state.to_dict()))))

    CachedCheckpoints.save = timed


def interrupting(part: float) -> Callable[[ProgressEvent], None]:
    """A progress hook that sends this process a SIGINT (as Ctrl-C) once ``part`` of the read is done, heard as a
    terminal's Ctrl-C is (a process started in the background of a script ignores SIGINT)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def on_progress(event: ProgressEvent) -> None:
        if event.stage == "read" and event.done >= part * event.total:
            signal.raise_signal(signal.SIGINT)

    return on_progress


def run(asked: QuestionSet, doc: Document, cache: Path, interrupt_at: float | None = None
        ) -> tuple[float, Pipeline, list[dict] | None]:
    """Seconds, the pipeline and its answers (None when interrupted by a SIGINT at ``interrupt_at`` of the read)."""
    pipeline = Pipeline(asked, RunSettings(llm=LLMSettings(enabled=False)), ResultCache(cache), progress=False,
                        on_progress=interrupting(interrupt_at) if interrupt_at else None)
    started = time.perf_counter()
    try:
        answers = [a.to_dict() for a in pipeline.run([doc]).answers]
    except KeyboardInterrupt:
        answers = None
    return time.perf_counter() - started, pipeline, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reader", required=True)
    parser.add_argument("--data", type=Path, required=True, help="folder of MLPsych's text.json")
    parser.add_argument("--work", type=Path, required=True, help="caches go here (emptied first)")
    parser.add_argument("--chars", type=int, default=800_000, help="the thesis's length (about 300 pages)")
    parser.add_argument("--questions", nargs="+", default=["q1", "q2", "q3"], help="of the mlpsych template")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    doc, asked = thesis(args.data, args.chars), questions(args.reader, args.questions)
    warm = Reader(args.reader)
    warm.warm_up()  # the model's files read once before any timing
    print(f"thesis: {len(doc.text):,} chars, {len(warm.windows(doc))} shared windows; reader {args.reader}; "
          f"checkpoint every {checkpoint.CHECKPOINT_SECONDS:g} s")
    warm.release()
    timed_saves()

    seconds_on, on, answers_on = run(asked, doc, args.work / "on")
    print(f"with checkpoints: {seconds_on:.1f} s, {on.windows_read} windows, {len(SAVES)} checkpoints of "
          f"{', '.join(f'{s:.3f} s/{b / 1e6:.2f} MB' for s, b in SAVES)}")
    interval = checkpoint.CHECKPOINT_SECONDS
    checkpoint.CHECKPOINT_SECONDS = math.inf
    seconds_off, _, answers_off = run(asked, doc, args.work / "off")
    print(f"without: {seconds_off:.1f} s; ratio {seconds_on / seconds_off:.3f}; saving was "
          f"{sum(s for s, _ in SAVES) / seconds_on:.2%} of the run; same answers: {answers_on == answers_off}")

    checkpoint.CHECKPOINT_SECONDS = interval
    stopped, _, _ = run(asked, doc, args.work / "interrupted", interrupt_at=0.6)
    seconds_rerun, rerun, answers_rerun = run(asked, doc, args.work / "interrupted")
    print(f"interrupted after {stopped:.1f} s; the rerun read {rerun.windows_read} of {on.windows_read} windows in "
          f"{seconds_rerun:.1f} s; same answers: {answers_rerun == answers_off}")


if __name__ == "__main__":
    main()
