"""What a coder waits for in the review at a study's size: opening a results workbook, one mark, leaving a paper
(the workbook written), and `mlpsych agree` reading the coding back.

    PYTHONPATH=. python benchmarks/review_marks.py --papers 57            # about 2,000 answer rows
    PYTHONPATH=. python benchmarks/review_marks.py --workbook big.xlsx    # a results workbook already written

A synthetic study is written through the export (``--answers`` final answers and ``--model-answers`` other models'
rows a paper, as a run of four questions with a few readers gives); a 1,000-paper workbook takes minutes to write,
so ``--keep`` leaves it for the next run's ``--workbook``.
"""
import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mlpsych.answers import Answer
from mlpsych.app.review import ReviewSheet
from mlpsych.documents import Document
from mlpsych.evaluation.agree import read_codings
from mlpsych.export import write_result
from mlpsych.pipeline import RunResult
from mlpsych.questions import load_question_set

WORDS = "model data participants random forest accuracy sample study results students logistic regression".split()


def synthetic_workbook(path: Path, papers: int, finals: int, others: int) -> None:
    rng = random.Random(0)
    questions = load_question_set("mlpsych").select(["q1", "q2", "q3"])
    docs, answers = [], []
    for p in range(papers):
        text = " ".join(rng.choice(WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(6000))
        doc = Document(f"paper{p:05d}", text, pages=[(0, len(text))], source_path=f"/papers/paper{p:05d}.pdf")
        docs.append(doc)
        for k in range(finals + others):
            start = rng.randrange(0, len(text) - 40)
            end = start + rng.randint(5, 30)
            answers.append(Answer(doc.id, f"q{k % 3 + 1}", text[start:end], "extractive", ["m"], rng.random(), start,
                                  end, 1, doc.sentence_around(start, end), final=k < finals,
                                  confidence=rng.random()))
    write_result(RunResult(docs, questions, answers), path)


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=57)
    parser.add_argument("--answers", type=int, default=35, help="final answers a paper (the answers sheet)")
    parser.add_argument("--model-answers", type=int, default=100, help="other models' rows a paper")
    parser.add_argument("--workbook", type=Path, help="a results workbook to time instead (copied, not changed)")
    parser.add_argument("--keep", type=Path, help="keep the synthetic workbook here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "review.xlsx"
        if args.workbook:
            shutil.copy(args.workbook, path)
        else:
            seconds = timed(lambda: synthetic_workbook(path, args.papers, args.answers, args.model_answers))
            print(f"wrote {args.papers} papers in {seconds:.1f} s")
            if args.keep:
                shutil.copy(path, args.keep)
        sheet: list[ReviewSheet] = []
        opened = timed(lambda: sheet.append(ReviewSheet(path, {})))
        review = sheet[0]
        paper = review.papers()[len(review.papers()) // 2]
        items = review.items(paper)
        def redraw():  # what the page reads on every click: the paper menu, the paper's answers, the questions
            return review.coded_counts(), review.items(paper), review.questions()

        first = timed(redraw)
        rows = sum(total for _, total in review.coded_counts().values())
        print(f"{rows:,} answer rows, {len(review.papers()):,} papers, {path.stat().st_size / 2**20:.1f} MB")
        print(f"open the review:        {opened:7.2f} s")
        print(f"first redraw:           {first:7.2f} s")
        marks = [timed(lambda i=item: review.mark(i.row, i.confidence > 0.5)) for item in items[:10]]
        print(f"one mark (median of {len(marks)}): {statistics.median(marks):7.3f} s   (max {max(marks):.3f} s)")
        print(f"redraw after a mark:    {timed(redraw):7.3f} s")
        print(f"leave the paper:        {timed(review.save):7.2f} s   (the workbook written)")
        print(f"agree reads it:         {timed(lambda: read_codings(path)):7.2f} s")
        print(f"reopen the review:      {timed(lambda: ReviewSheet(path, {})):7.2f} s")


if __name__ == "__main__":
    main()
