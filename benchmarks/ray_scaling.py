"""Papers per minute with the local engine and with the Ray engine at 1, 2, ... workers, on one machine.

    .venv/bin/python benchmarks/ray_scaling.py --mlpsych ../shared/mlpsych --papers 12 --configs 1x1,2x1,1x2

Reads the first N papers of the MLPsych ``text.json`` (or every .txt of ``--folder``) with tiny random-weight
models of the real families (``mlpsych.dev.tiny``; nothing is downloaded), so what it measures is the engine's
scaling and overhead, not a real model's speed. Each configuration starts from an empty cache; the time
includes starting the workers and loading their models, as a user waits for it. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import tempfile
import time
from pathlib import Path

from mlpsych.dev.tiny import build_tiny_models
from mlpsych.documents import Document
from mlpsych.questions import load_question_set
from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings

log = logging.getLogger("ray_scaling")


def load_papers(args: argparse.Namespace) -> list[Document]:
    if args.folder:
        paths = sorted(Path(args.folder).glob("*.txt"))[: args.papers]
        return [Document(id=p.stem, text=p.read_text(encoding="utf-8")) for p in paths]
    raw = json.loads(Path(args.mlpsych, "text.json").read_text(encoding="utf-8"))
    texts = json.loads(raw) if isinstance(raw, str) else raw
    return [Document(id=str(k), text=v) for k, v in list(texts.items())[: args.papers]]


def questions_file(folder: Path, models: dict[str, Path]) -> Path:
    """The fast question set of the tests: a two-reader q1, a may-be-empty q2, a bridge q4."""
    path = folder / "questions.yaml"
    path.write_text(
        "questions:\n"
        "  - id: q1\n    text: What machine learning techniques were used?\n"
        f"    models: ['{models['electra']}', '{models['roberta']}']\n    top_k: 10\n"
        "  - id: q2\n    text: What software was used?\n"
        f"    models: ['{models['bert']}']\n    top_k: 5\n    allow_empty: true\n"
        "  - id: q4\n    text: What was __PLACEHOLDER__ used for?\n    kind: phrase\n"
        f"    models: ['{models['bert']}']\n    bridge_from: q1\n    top_k: 3\n",
        encoding="utf-8",
    )
    return path


def timed(engine, questions, settings, docs, cache_dir: Path) -> tuple[float, dict]:
    started = time.perf_counter()
    result = engine.run(questions, settings, docs, cache_dir, progress=False)
    return time.perf_counter() - started, result.info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--mlpsych", type=Path, help="folder with the MLPsych text.json")
    source.add_argument("--folder", type=Path, help="folder of .txt papers")
    parser.add_argument("--papers", type=int, default=12)
    parser.add_argument("--configs", default="1x1,2x1,1x2",
                        help="Ray configurations to try, WORKERSxCPUS each (CPUs = torch threads per worker)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count(), help="CPUs given to the local Ray instance")
    parser.add_argument("--tiny-dir", type=Path, default=Path(tempfile.gettempdir()) / "mlpsych-tiny")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import ray

    from mlpsych.engines.local import LocalEngine
    from mlpsych.engines.ray_engine import RayEngine

    docs = load_papers(args)
    models = build_tiny_models(args.tiny_dir, ["electra", "roberta", "bert"])
    settings = RunSettings(reader=ReaderSettings(max_length=512, stride=128), llm=LLMSettings(enabled=False),
                           max_sub_questions=3)
    with tempfile.TemporaryDirectory() as tmp:
        questions = load_question_set(questions_file(Path(tmp), models))
        rows = []
        seconds, info = timed(LocalEngine(), questions, settings, docs, Path(tmp) / "local")
        rows.append(("local", seconds, info))
        ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        try:
            for config in args.configs.split(","):
                n, cpus = (int(x) for x in config.split("x"))
                engine = RayEngine(workers=n, cpus_per_worker=cpus)
                seconds, info = timed(engine, questions, settings, docs, Path(tmp) / f"ray{config}")
                rows.append((f"ray, {n} worker{'s' if n > 1 else ''} x {cpus} CPU{'s' if cpus > 1 else ''}",
                             seconds, info))
        finally:
            ray.shutdown()
    chars = sum(len(d.text) for d in docs)
    print(f"{len(docs)} papers ({chars / len(docs) / 1000:.0f}k characters on average), {args.cpus} CPUs for Ray, "
          f"{platform.processor() or platform.machine()}; local engine: torch's default threads")
    print("\n| engine | seconds | papers/min | windows read | speed-up vs 1 worker x 1 CPU |\n|---|---|---|---|---|")
    one = next((s for name, s, _ in rows if name == "ray, 1 worker x 1 CPU"), None)
    for name, seconds, info in rows:
        speedup = f"{one / seconds:.2f}x" if one and name.startswith("ray") else ""
        print(f"| {name} | {seconds:.1f} | {len(docs) * 60 / seconds:.1f} | {info.windows_read} | {speedup} |")


if __name__ == "__main__":
    main()
