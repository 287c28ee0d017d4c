"""Proof that ``--preset reference`` answers as the paper's code answered: the transformers question-answering pipeline
and the released post-processing against mlpsych's reader and rules in the reference settings.

    python benchmarks/reference_equivalence.py --data ../shared/mlpsych --reader READER_FOLDER

READER_FOLDER is a trained SQuAD2 reader (``mlpsych dev train-reader``). The pipeline runs in its own virtual
environment (``--ref-venv``, created once with pip; mlpsych is not installed there) through
``benchmarks/_reference_qa.py``: ``pipeline("question-answering")(question, context, top_k=30, doc_stride=128)``,
everything else default, fp32, with transformers 4.57.1 where the preset sums same texts (``--same-text summed``,
the preset's) or 4.40.2 where it keeps them (``kept``). mlpsych reads the same texts with ``Reader`` under the
``reference`` preset's reader settings. For every development paper and question (q1-q3, and q4 asked of one
entity), the two raw top-30 lists must hold the same spans (char offsets, texts) with scores within
``--tolerance``; a span whose score ties another within the tolerance may swap places with it, and at the cut
(rank 30) a span may differ when its score is within the tolerance of the cut. Then the final answers: for q1-q3,
``mlpsych``'s whole ``--preset reference`` run (LLM off, the reader in every slot) against the pipeline's raw list
through the released post-processing, compared as sets of texts. Exit status 1 when any list or set differs.

    python benchmarks/reference_equivalence.py --data ../shared/mlpsych --cases ../shared/mlpsych/released_cases.jsonl

checks the post-processing alone, without a reader: each case holds the pipeline's raw top-30 list of one paper and
question and the final answer set the paper's released code made of it (top-20 cutoff, merging, trimming, strip,
set). The raw list goes through ``reading.released`` and the two sets are compared, each paper and question reported
equal or with its first difference (in code-point order of the texts). Both checks run when both are given.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._devset import development_set  # noqa: E402
from benchmarks.reader_vs_reference import ensure_ref_venv, run_reference  # noqa: E402
from mlpsych.answers import Span  # noqa: E402
from mlpsych.cache import ResultCache  # noqa: E402
from mlpsych.documents import Document  # noqa: E402
from mlpsych.evaluation.evaluate import load_texts  # noqa: E402
from mlpsych.pipeline import Pipeline  # noqa: E402
from mlpsych.questions import load_question_set  # noqa: E402
from mlpsych.reading.reader import Query, Reader  # noqa: E402
from mlpsych.reading.released import released_answers  # noqa: E402
from mlpsych.settings import PRESETS, ReaderSettings, apply_preset, substitute_models  # noqa: E402

# The pipeline whose reading each ``same_text`` setting reproduces: 4.40.2, the version the paper's code was released
# with, keeps same texts; 4.57.1, which the released code's answers in released_cases.jsonl were made with, sums them.
REF_VERSIONS = {"kept": "transformers==4.40.2", "summed": "transformers==4.57.1"}
REF_VENVS = {"kept": Path("/tmp/mlpsych-ref440-venv"), "summed": Path("/tmp/mlpsych-ref457-venv")}
FINAL_QUESTIONS = ["q1", "q2", "q3"]
TOP_K = 30
FOLLOW_UP_ENTITY = "machine learning"  # q4 is asked of one entity every paper mentions


def questions() -> list[str]:
    library = load_question_set("mlpsych")
    return [q.sub_question(FOLLOW_UP_ENTITY) if q.bridge_from else q.text for q in library.questions]


def read_ours(reader_path: str, papers: list[dict], asked: list[str], same_text: str
              ) -> tuple[dict[str, list[list[dict]]], float]:
    """Raw spans of mlpsych's reader in the reference preset's reader settings, per paper and question."""
    settings = ReaderSettings(**{**PRESETS["reference"].settings["reader"], "device": "cpu", "same_text": same_text})
    reader = Reader(reader_path, settings)
    reader.warm_up()
    found: dict[str, list[list[dict]]] = {}
    started = time.perf_counter()
    for paper in papers:
        doc = Document(id=paper["id"], text=paper["text"])
        queries = [Query(f"q{i}", text, top_k=TOP_K, max_answer_tokens=settings.max_answer_tokens)
                   for i, text in enumerate(asked)]
        spans = reader.run(doc, queries)
        found[paper["id"]] = [[{"start": s.start, "end": s.end, "score": s.score, "answer": s.text}
                               for s in spans[i]] for i in range(len(asked))]
    return found, time.perf_counter() - started


def compare(ref: list[dict], ours: list[dict], tolerance: float) -> tuple[list[str], float]:
    """Differences between two ranked span lists (none when equivalent), as lines to print, and the largest score
    difference of a matched pair."""
    problems = []
    worst = 0.0
    cut = min(a["score"] for a in ref) if len(ref) >= TOP_K else -1.0
    unmatched = list(ours)
    for rank, a in enumerate(ref, start=1):
        match = next((b for b in unmatched if (b["start"], b["end"]) == (a["start"], a["end"])
                      and abs(b["score"] - a["score"]) <= tolerance), None)
        if match is None:
            if a["score"] > cut + tolerance:
                problems.append(f"rank {rank}: pipeline {a['answer']!r} [{a['start']}:{a['end']}] {a['score']:.6f} "
                                "not found")
            continue
        unmatched.remove(match)
        worst = max(worst, abs(match["score"] - a["score"]))
        if match["answer"] != a["answer"]:
            problems.append(f"rank {rank}: text {match['answer']!r} != {a['answer']!r}")
        position = ours.index(match) + 1
        ties = [b for b in ours[min(rank, position) - 1: max(rank, position)] if abs(b["score"] - a["score"]) > tolerance]
        if position != rank and ties:
            problems.append(f"rank {rank}: at rank {position} in mlpsych's list ({a['answer']!r})")
    problems += [f"extra in mlpsych: {b['answer']!r} [{b['start']}:{b['end']}] {b['score']:.6f}" for b in unmatched
                 if b["score"] > cut + tolerance]
    if len(ours) != len(ref):
        problems.append(f"{len(ours)} spans, the pipeline {len(ref)}")
    return problems, worst


def final_set(doc: Document, question_id: str, raw: list[dict]) -> list[str]:
    """What the released code keeps of a raw list: its post-processing (``reading.released``), each answer
    stripped, as a sorted set."""
    spans = [Span(doc.id, question_id, "reader", a["answer"], a["start"], a["end"], a["score"]) for a in raw]
    return sorted({a.text.strip() for a in released_answers(doc, spans)})


def first_difference(ours: list[str], released: list[str]) -> str:
    """The first text (code-point order) in one sorted set and not the other, and where it is; "" when equal."""
    only = sorted([(t, "mlpsych") for t in set(ours) - set(released)] +
                  [(t, "released") for t in set(released) - set(ours)])
    if not only:
        return ""
    text, side = only[0]
    return f"only in {side}: {text!r} ({len(only)} texts differ; {len(ours)} answers, released {len(released)})"


def preset_finals(reader_path: str, docs: list[Document], same_text: str) -> dict[str, dict[str, list[str]]]:
    """mlpsych's final answers of ``--preset reference`` for q1-q3 (the whole run, LLM off, the reader in every
    slot), per paper and question as sorted sets of texts."""
    library = load_question_set("mlpsych").select(FINAL_QUESTIONS)
    questions, settings = apply_preset("reference", library)
    settings = settings.model_copy(update={
        "llm": settings.llm.model_copy(update={"enabled": False}),
        "reader": settings.reader.model_copy(update={"device": "cpu", "same_text": same_text})})
    questions = substitute_models(questions, {m: reader_path for q in questions.questions for m in q.models})
    with tempfile.TemporaryDirectory() as cache:
        result = Pipeline(questions, settings, ResultCache(cache), progress=False).run(docs)
    finals: dict[str, dict[str, set[str]]] = {d.id: {q: set() for q in FINAL_QUESTIONS} for d in docs}
    for answer in result.answers:
        if answer.final:
            finals[answer.doc_id][answer.question_id].add(answer.text.strip())
    return {paper: {q: sorted(texts) for q, texts in by_q.items()} for paper, by_q in finals.items()}


def check_cases(cases: Path, texts: dict[str, str]) -> tuple[int, int]:
    """Every case's raw list through mlpsych's released rules against the released code's final set, printed per
    paper and question; ``(equal, cases)``."""
    equal = total = 0
    by_question: dict[str, list[int]] = {}
    for line in cases.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        doc = Document(id=case["paper_id"], text=texts[case["paper_id"]])
        difference = first_difference(final_set(doc, case["question_id"], case["raw"]), case["final"])
        total += 1
        equal += not difference
        by_question.setdefault(case["question_id"], [0, 0])[0] += not difference
        by_question[case["question_id"]][1] += 1
        print(f"{case['paper_id']} {case['question_id']}: {difference or 'equal'}")
    print("final answer sets equal: " + ", ".join(f"{q} {e} of {n}" for q, (e, n) in sorted(by_question.items())) +
          f"; all {equal} of {total} ({cases.name}, raw lists through reading.released)")
    return equal, total


def compare_reading(args: argparse.Namespace) -> bool:
    """The pipeline's raw top-30 lists against mlpsych's reader in the reference settings, then the released
    post-processing of the pipeline's lists against mlpsych's whole reference run; printed, True when all agree."""
    asked = questions()
    wanted = {i for i in args.ids.split(",") if i}
    docs = [d for d in development_set(args.data, args.papers)[1] if not wanted or d.id in wanted]
    papers = [{"id": d.id, "text": d.text, "questions": asked} for d in docs]
    python = ensure_ref_venv(args.ref_venv or REF_VENVS[args.same_text], [REF_VERSIONS[args.same_text]])
    started = time.perf_counter()
    reference = run_reference(python, Path(args.reader), papers, args.threads)
    ref_seconds = time.perf_counter() - started
    ours, our_seconds = read_ours(args.reader, papers, asked, args.same_text)

    lists = equal = 0
    worst = 0.0
    for paper in reference["papers"]:
        for i, ref in enumerate(paper["by_question"]):
            lists += 1
            mine = ours[paper["id"]][i]
            problems, diff = compare(ref, mine, args.tolerance)
            worst = max(worst, diff)
            if problems:
                print(f"{paper['id']} q{i + 1}: " + "; ".join(problems[:4]) + (" ..." if len(problems) > 4 else ""))
            else:
                equal += 1
    print(f"transformers {reference['transformers']} pipeline vs mlpsych reference preset (same texts "
          f"{args.same_text}), reader {Path(args.reader).name}, {len(papers)} papers x {len(asked)} questions, "
          f"top {TOP_K}")
    print(f"equivalent lists: {equal} of {lists}; largest score difference of a matched span {worst:.2e} "
          f"(tolerance {args.tolerance:g}); seconds: pipeline {ref_seconds:.0f} (with start-up), mlpsych {our_seconds:.0f}")

    started = time.perf_counter()
    finals = preset_finals(args.reader, docs, args.same_text)
    run_seconds = time.perf_counter() - started
    by_id = {d.id: d for d in docs}
    sets = same = 0
    for paper in reference["papers"]:
        for qid in FINAL_QUESTIONS:
            released = final_set(by_id[paper["id"]], qid, paper["by_question"][int(qid[1:]) - 1])
            difference = first_difference(finals[paper["id"]][qid], released)
            sets += 1
            same += not difference
            if difference:
                print(f"{paper['id']} {qid} final answers: {difference}")
    print(f"final answer sets equal (mlpsych run --preset reference vs the pipeline's list through the released "
          f"post-processing): {same} of {sets}; seconds: mlpsych run {run_seconds:.0f}")
    return equal == lists and same == sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the MLPsych folder (text.json, answers_dev.json)")
    parser.add_argument("--reader", help="a trained reader folder (Hub layout): compare the raw lists and finals")
    parser.add_argument("--cases", type=Path, help="released_cases.jsonl: compare the final answer sets")
    parser.add_argument("--papers", type=int, default=None, help="only the first N development papers")
    parser.add_argument("--ids", default="", help="only these development papers (comma-separated ids)")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--same-text", choices=sorted(REF_VERSIONS),
                        default=PRESETS["reference"].settings["reader"]["same_text"],
                        help="mlpsych's reading of same texts, and so the pipeline's version (default: the preset's)")
    parser.add_argument("--ref-venv", type=Path, default=None,
                        help="the pipeline's venv (default: REF_VENVS)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if not args.reader and not args.cases:
        parser.error("give --reader, --cases or both")
    ok = True
    if args.cases:
        equal, total = check_cases(args.cases, load_texts(args.data / "text.json"))
        ok = equal == total
    if args.reader:
        ok = compare_reading(args) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
