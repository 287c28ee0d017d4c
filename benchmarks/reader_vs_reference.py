"""Our reader against the reference approach, same saved model, same papers: seconds per paper and the ratio.

    python benchmarks/reader_vs_reference.py --data ../shared/mlpsych [--papers 2] [--max-words 1500]

The reference is the paper's code path: transformers 4.x ``pipeline("question-answering", top_k=30,
doc_stride=128)`` (max_seq_len 384, one window at a time). transformers 5 has no such pipeline, so the script
installs transformers<5 into its own virtual environment (``--ref-venv``, created once with pip) and runs
``benchmarks/_reference_qa.py`` there. The models are random-weight models with the real DeBERTa-v3-large and
ELECTRA-large configurations built by ``mlpsych.dev.tiny.build_model_with_config`` (weights do not change the
cost of a window). Our reader reads the same papers with the same window length (384) and stride (128):
fully, and with BM25 retrieval (``--budget`` windows). Model loading is timed separately, not per paper.

``--template`` times a whole template instead of q1 alone: every question of the mlpsych template, q4 once per
bridge entity (the paper's gold q1 answers, as in reading_cost.py), one model for all of them. The reference
reads the whole paper per question (with ``--ensembles``, per question and ensemble model, as the paper's
approach does: the same saved model stands for each member); ours is the fast preset's cascade with its own
readers in their real architectures (random weights): MiniLM-L12 reads every window (q4: each entity's windows,
and the general sub-question's), DeBERTa-v3-base the windows it picks, once per question, at the model's 512
tokens, selection included in the time (``--dtype auto``: bf16 where the CPU has it; ``--fast-arms`` times it once
per runtime and dtype, e.g. torch against ONNX Runtime). ``--skip-reference`` times ours alone.
The arms run in turn ``--repeat`` times and the median of each is reported, so that the machine's slow
spells (it is shared) fall on all arms alike. Prints seconds and ratios, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REF_PACKAGES = ["torch==2.13.0", "transformers<5", "sentencepiece", "protobuf"]
QUESTION = "What machine learning or natural language processing techniques were used?"
SIZES = {"deberta-v2": "large", "electra": "large"}


def ensure_ref_venv(venv: Path, pins: list[str] | None = None) -> Path:
    """The reference environment's python; created and filled with pip on first use (``pins`` replace the
    transformers<5 requirement, e.g. an exact version)."""
    packages = REF_PACKAGES if not pins else [p for p in REF_PACKAGES if not p.startswith("transformers")] + pins
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import transformers, torch; assert int(transformers.__version__.split('.')[0]) < 5"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"creating the reference environment in {venv} (pip install {' '.join(packages)}) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    return python


def load_papers(data: Path, count: int, max_words: int, pick: str = "first") -> list[dict]:
    """``count`` development papers: the first ones, or those closest to the median (or mean) length,
    with their gold q1 answers (the bridge entities of a whole-template run)."""
    with open(data / "text.json", encoding="utf-8") as handle:
        texts = json.loads(json.load(handle))
    with open(data / "answers_dev.json", encoding="utf-8") as handle:
        q1_gold = json.load(handle)["q1"]
    ids = list(q1_gold)
    if pick in ("median", "mean"):
        lengths = [len(texts[i].split()) for i in ids]
        middle = statistics.median(lengths) if pick == "median" else statistics.mean(lengths)
        ids = sorted(ids, key=lambda i: abs(len(texts[i].split()) - middle))
    papers = []
    for pid in ids[:count]:
        words = texts[pid].split(" ")
        text = " ".join(words[:max_words]) if max_words else texts[pid]
        entities = list(dict.fromkeys(" ".join(a["text"].split()) for a in q1_gold[pid]))
        papers.append({"id": pid, "text": text, "entities": [e for e in entities if e]})
    return papers


def template_questions(paper: dict, ensembles: bool = False) -> list[tuple[str, str | None, object]]:
    """(question text, bridge entity, template) of the mlpsych template for this paper, as the paper asks them;
    with ``ensembles``, once per model of the template's ensemble (the same saved model stands for each)."""
    from mlpsych.questions import load_question_set

    asked = []
    for q in load_question_set("mlpsych").questions:
        reads = len(q.models) if ensembles else 1
        if q.bridge_from:
            asked += [(q.sub_question(e), e, q) for e in paper["entities"][: q.max_sub_questions]] * reads
        else:
            asked += [(q.text, None, q)] * reads
    return asked


def template_queries(paper: dict, doc, reader, selector, small) -> list:
    """Our queries for the whole template under the fast preset: the small reader reads each question's windows
    (q4: each entity's, with the template's ``also_ask`` sub-questions), the cascade picks the large reader's."""
    from mlpsych.multihop import entities_to_ask
    from mlpsych.reading.reader import Query
    from mlpsych.retrieval import cascade, plan_for
    from mlpsych.settings import PRESETS

    fast = PRESETS["fast"].retrieval
    asked = template_questions(paper)
    q4 = next(q for _, e, q in asked if q.bridge_from) if any(e for _, e, _ in asked) else None
    if q4 is not None:
        entities = paper["entities"][: q4.max_sub_questions]
        asked += [(q4.sub_question(e), e, q4) for e in entities_to_ask(q4, entities, True)[len(entities):]]
    queries = [Query(q.id, text, top_k=q.top_k, max_answer_tokens=q.answer_tokens, bridge_entity=entity)
               for text, entity, q in asked]
    found = small.run(doc, [cascade.small_query(query, fast.cascade, small, doc) for query in queries])
    return [cascade.restrict(query, plan_for(q.retrieval, fast), selector, reader, doc, found[i])
            for i, (query, (_, _, q)) in enumerate(zip(queries, asked))]


def build_model(work: Path, family: str, size: str, data: Path) -> Path:
    """A random-weight model in the real architecture of ``family``-``size``, built once in ``work``."""
    from mlpsych.dev.tiny import build_model_with_config

    out = work / f"{family}-{size}"
    if not (out / "model.safetensors").is_file():
        print(f"building random-weight {family}-{size} in {out} ...", flush=True)
        with open(data / "text.json", encoding="utf-8") as handle:
            corpus = list(json.loads(json.load(handle)).values())
        build_model_with_config(family, out, size, tokenizer_texts=corpus)
    return out


def build_models(work: Path, families: list[str], data: Path) -> dict[str, Path]:
    return {family: build_model(work, family, SIZES[family], data) for family in families}


def run_reference(python: Path, model: Path, papers: list[dict], threads: int, template: bool = False,
                  ensembles: bool = False) -> dict:
    if template:
        papers = [{**p, "questions": [text for text, _, _ in template_questions(p, ensembles)]} for p in papers]
    job = {"model": str(model), "question": QUESTION, "top_k": 30, "doc_stride": 128, "papers": papers,
           "threads": threads}
    with tempfile.TemporaryDirectory() as tmp:
        job_path, out_path = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        script = Path(__file__).resolve().parent / "_reference_qa.py"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
        subprocess.run([str(python), str(script), str(job_path), str(out_path)], check=True, env=env)
        return json.loads(out_path.read_text(encoding="utf-8"))


def run_ours(model: Path, papers: list[dict], budget: int | None, dtype: str, threads: int,
             question_tokens: int | None = None, batch_size: int | None = None, template: bool = False,
             small_model: Path | None = None, runtime: str = "torch") -> dict:
    """Seconds per paper for our reader; ``budget`` = BM25 retrieval of that many windows, None = full read;
    ``template``: the whole template as the fast preset reads it, ``small_model`` reading first (the cascade),
    ``model`` the windows it picks, at the fast preset's window length (the model's maximum)."""
    import torch

    from mlpsych.documents import Document
    from mlpsych.reading.reader import Query, Reader
    from mlpsych.retrieval import Plan, WindowSelector
    from mlpsych.settings import ReaderSettings

    torch.set_num_threads(threads)
    room = {} if question_tokens is None else {"question_tokens": question_tokens}
    length = None if template else 384
    reader = Reader(str(model), ReaderSettings(max_length=length, stride=128, batch_size=batch_size, device="cpu",
                                               dtype=dtype, runtime=runtime, **room))
    small = Reader(str(small_model), ReaderSettings(max_length=None, device="cpu", dtype=dtype, runtime=runtime)) \
        if template else None
    started = time.perf_counter()
    reader.warm_up()
    if small is not None:
        small.warm_up()
    load_seconds = time.perf_counter() - started
    selector = WindowSelector()
    out = []
    for paper in papers:
        doc = Document(id=paper["id"], text=paper["text"])
        tick = time.perf_counter()
        windows = reader.windows(doc)
        small_before = small.windows_read if small else 0
        if template:
            queries = template_queries(paper, doc, reader, selector, small)
        else:
            chosen = selector.select(doc, windows, QUESTION, Plan(mode="bm25", budget=budget)) if budget else None
            queries = [Query("q1", QUESTION, top_k=30, max_answer_tokens=30, windows=chosen)]
        before = reader.windows_read
        reader.run(doc, queries)
        out.append({"id": paper["id"], "seconds": time.perf_counter() - tick, "windows": reader.windows_read - before,
                    "all_windows": len(windows), "small_windows": small.windows_read - small_before if small else 0})
        reader._encoded.clear()  # each paper tokenized inside its own timing
        if small is not None:
            small._encoded.clear()
    reader.release()
    if small is not None:
        small.release()
    return {"load_seconds": load_seconds, "papers": out}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--papers", type=int, default=2, help="how many development papers (first ones)")
    parser.add_argument("--max-words", type=int, default=1500, help="truncate each paper (0: whole papers)")
    parser.add_argument("--families", default="deberta-v2,electra")
    parser.add_argument("--budget", type=int, default=3, help="windows read with retrieval")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "mlpsych-bench-models")
    parser.add_argument("--ref-venv", type=Path, default=Path(tempfile.gettempdir()) / "mlpsych-ref-venv")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--pick", choices=["first", "median", "mean"], default="first",
                        help="which papers: the first ones, or those closest to the median or mean length")
    parser.add_argument("--skip-reference", action="store_true", help="time ours only")
    parser.add_argument("--bf16", action="store_true", help="also time our full read in bf16")
    parser.add_argument("--dtype", default="fp32", help="our readers' dtype with --template (auto: bf16 where the "
                        "CPU has it, as the fast preset runs)")
    parser.add_argument("--fast-arms", type=lambda v: [tuple(x.split(":")) for x in v.split(",")], default=None,
                        help="with --template: the fast preset once per RUNTIME:DTYPE, e.g. torch:auto,"
                             "onnxruntime:fp32,onnxruntime:int8 (default: torch:--dtype)")
    parser.add_argument("--question-tokens", type=int, default=None,
                        help="room our reader keeps for the question in each window (default: ReaderSettings')")
    parser.add_argument("--skip-full", action="store_true", help="time only our read with retrieval")
    parser.add_argument("--batch-sizes", type=lambda v: [None if x == "auto" else int(x) for x in v.split(",")],
                        default=[None], help="our full read at each of these batch sizes (comma-separated; "
                                             "default auto: the reader's choice for the model on a CPU)")
    parser.add_argument("--template", action="store_true",
                        help="time the whole mlpsych template (q1-q4) instead of q1: the reference reads the whole "
                             "paper per question, ours the fast preset's retrieval")
    parser.add_argument("--ensembles", action="store_true",
                        help="with --template: the reference reads each question once per model of the template's "
                             "ensemble (q1-q3: two), as the paper's approach does, the same saved model standing "
                             "for each; ours reads each once (the fast preset's one reader per question)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="repetitions; the arms run in turn within each, and medians are reported")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import platform

    from mlpsych.settings import ReaderSettings

    python = None if args.skip_reference else ensure_ref_venv(args.ref_venv)
    families = [f for f in args.families.split(",") if f][: 1 if args.skip_reference else None]
    models = {} if args.skip_reference else build_models(args.work, families, args.data)
    papers = load_papers(args.data, args.papers, args.max_words, args.pick)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch threads {args.threads}; "
          f"{len(papers)} papers, {args.max_words or 'all'} words each; "
          f"questions: {'the mlpsych template' if args.template else 'q1'}"
          f"{' (reference: every question per ensemble model)' if args.ensembles else ''}; "
          f"our question room {args.question_tokens or ReaderSettings().question_tokens} tokens")
    for family in families:
        model = models.get(family)
        arms = [] if args.skip_reference else [
            ("reference", lambda: run_reference(python, model, papers, args.threads, args.template, args.ensembles))]
        if args.template:  # the fast preset's readers: DeBERTa-v3-base in the large slots, MiniLM-L12 choosing
            base = build_model(args.work, "deberta-v2", "base", args.data)
            small = build_model(args.work, "bert", "minilm-l12", args.data)
            for runtime, dtype in args.fast_arms or [("torch", args.dtype)]:
                label = "ours, fast (cascade)" + (f", {runtime} {dtype}" if args.fast_arms else "")
                arms.append((label, partial(run_ours, base, papers, None, dtype, args.threads, args.question_tokens,
                                            template=True, small_model=small, runtime=runtime)))
        if not args.skip_full and not args.template:
            for size in args.batch_sizes:
                arms.append((f"ours, full read, batch {size or 'auto'}", partial(run_ours, model, papers, None, "fp32",
                                                                        args.threads, args.question_tokens, size)))
        if not args.template:
            arms.append((f"ours, BM25 {args.budget} windows", lambda: run_ours(model, papers, args.budget, "fp32",
                                                                              args.threads, args.question_tokens)))
        if args.bf16:
            arms.append(("ours, full read, bf16", lambda: run_ours(model, papers, None, "bf16", args.threads,
                                                                   args.question_tokens)))
        runs: dict[str, list[dict]] = {label: [] for label, _ in arms}
        for _ in range(args.repeat):  # arms interleaved, so a slow spell of the machine hits all of them
            for label, arm in arms:
                runs[label].append(arm())
        report(family, papers, runs)


def _median_seconds(runs: list[dict], paper: int) -> float:
    return statistics.median(r["papers"][paper]["seconds"] for r in runs)


def report(family: str, papers: list[dict], runs: dict[str, list[dict]]) -> None:
    """Per paper the median seconds of each arm over the repetitions, and reference/ours ratios."""
    if "reference" not in runs:
        for label, r in runs.items():
            print(f"\n== {label}; median of {len(r)} repetitions; model load {r[0]['load_seconds']:.1f} s")
            for i, paper in enumerate(papers):
                cell = r[0]["papers"][i]
                print(f"{paper['id']:<14}{len(paper['text'].split()):>7} words {_median_seconds(r, i):>8.1f} s  "
                      f"large windows {cell['windows']}, small windows {cell['small_windows']} "
                      f"(of {cell['all_windows']} large windows in the paper)")
        return
    ref_runs = runs["reference"]
    ours = [(label, r) for label, r in runs.items() if label != "reference"]
    print(f"\n== {family}-{SIZES[family]} (random weights); reference: transformers {ref_runs[0]['transformers']}, "
          f"pipeline top_k=30 doc_stride=128; median of {len(ref_runs)} interleaved repetitions")
    print(f"model load: reference {statistics.median(r['load_seconds'] for r in ref_runs):.1f} s, ours "
          f"{statistics.median(r['load_seconds'] for r in ours[0][1]):.1f} s")
    print(f"{'paper':<14}{'ref win':>8}{'all win':>8}{'reference s':>13}" + "".join(f"{label:>28}" for label, _ in ours))
    for i, paper in enumerate(papers):
        ref_s = _median_seconds(ref_runs, i)
        cells = "".join(f"{_median_seconds(r, i):>12.1f} s ({ref_s / _median_seconds(r, i):>5.2f}x,"
                        f"{r[0]['papers'][i]['windows']:>3}w)" for _, r in ours)
        print(f"{paper['id']:<14}{ref_runs[0]['papers'][i]['windows']:>8}{ours[0][1][0]['papers'][i]['all_windows']:>8}"
              f"{ref_s:>13.1f}{cells}")
    ref_total = sum(_median_seconds(ref_runs, i) for i in range(len(papers)))
    for label, r in ours:
        total = sum(_median_seconds(r, i) for i in range(len(papers)))
        each = [sum(p["seconds"] for p in a["papers"]) / sum(p["seconds"] for p in b["papers"])
                for a, b in zip(ref_runs, r)]
        print(f"mean s/paper {label:<28} {total / len(papers):>7.1f}   reference {ref_total / len(papers):>7.1f}   "
              f"reference/ours {ref_total / total:>5.2f}x   (per repetition: {', '.join(f'{x:.2f}x' for x in each)})")

if __name__ == "__main__":
    main()
