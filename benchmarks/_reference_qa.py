"""The reference approach, run inside its own virtual environment with transformers 4.x (not mlpsych's).

    /tmp/mlpsych-ref-venv/bin/python benchmarks/_reference_qa.py JOB.json RESULT.json

JOB.json: {"model": dir, "question": str, "top_k": 30, "doc_stride": 128, "papers": [{"id", "text", "questions"?}],
"threads": n}. It reads every paper with ``pipeline("question-answering", top_k=30, doc_stride=128)`` as the
paper's code does (default max_seq_len 384, batch size 1), for the paper's own ``questions`` if it has them (a whole
template: every question reads the whole paper), else for ``question``, and writes the seconds each paper took,
the windows read and the answers returned (all questions' together in ``answers``; per question, with their
texts, in ``by_question``).
Only transformers, torch and the standard library are used here: mlpsych is not importable in that venv.
"""

import json
import sys
import time


def main() -> None:
    job = json.load(open(sys.argv[1], encoding="utf-8"))
    import torch
    import transformers
    from transformers import pipeline

    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    started = time.perf_counter()
    qa = pipeline("question-answering", model=job["model"], tokenizer=job["model"], device=-1)
    load_seconds = time.perf_counter() - started
    papers = []
    for paper in job["papers"]:
        questions = paper.get("questions") or [job["question"]]
        tick = time.perf_counter()
        by_question = []
        with torch.inference_mode():
            for question in questions:
                got = qa(question=question, context=paper["text"], top_k=job["top_k"], doc_stride=job["doc_stride"],
                         handle_impossible_answer=False)
                by_question.append([got] if isinstance(got, dict) else got)
        answers = [a for found in by_question for a in found]
        seconds = time.perf_counter() - tick
        windows = sum(len(qa.tokenizer(q, paper["text"], truncation="only_second", max_length=384,
                                       stride=job["doc_stride"], return_overflowing_tokens=True)["input_ids"])
                      for q in questions)
        papers.append({"id": paper["id"], "seconds": seconds, "windows": windows,
                       "answers": [{"start": a["start"], "end": a["end"], "score": float(a["score"])} for a in answers],
                       "by_question": [[{"start": a["start"], "end": a["end"], "score": float(a["score"]),
                                         "answer": a["answer"]} for a in found] for found in by_question]})
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "threads": torch.get_num_threads(),
              "load_seconds": load_seconds, "papers": papers}
    json.dump(result, open(sys.argv[2], "w", encoding="utf-8"))


if __name__ == "__main__":
    main()
