"""Record what `mlpsych run` produces on examples/papers with the tiny models, to compare two trees byte for byte.

A refactor must not change behaviour: run this once from a checkout of main and once from the branch, each with
its own tree first on PYTHONPATH and the same PREP folder, then `diff -r` the two OUT folders (JSONL answers and
their rerun from the cache, the run sheet's rows in order with timings stripped, paper rows, frequencies, LLM
outputs, the progress events, and every cache key with a hash of its value).

    PYTHONPATH=$TREE python benchmarks/refactor_outputs.py prep PREP      # once: tiny models, study file,
                                                                           # a calibrator and an adapted reader
    PYTHONPATH=$TREE python benchmarks/refactor_outputs.py run PREP OUT [RUN ...]
"""
import hashlib
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import yaml  # noqa: E402

import mlpsych.engines.local as local  # noqa: E402
import mlpsych.export as export  # noqa: E402
from mlpsych.cli import main  # noqa: E402

PAPERS = "examples/papers"
TIMINGS = ("started", "seconds", "cache")  # differ between any two runs


def prep(folder: Path) -> None:
    """The inputs both trees share: tiny models, study-coding on them, a calibrator, an adapted reader."""
    tiny = folder / "tiny"
    assert main(["dev", "tiny-models", str(tiny)]) == 0
    study = yaml.safe_load(Path("questions/study-coding.yaml").read_text())
    family = {"deberta": "deberta-v2", "albert": "albert", "electra": "electra", "roberta": "roberta"}
    for q in study["questions"]:
        q["models"] = [str(tiny / next(v for k, v in family.items() if k in m)) for m in q["models"]]
    (folder / "study-tiny.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    # a calibrator other than the default: the default's coefficients halved, fitted_on saying so
    from mlpsych.coding.confidence import Calibrator
    default = Calibrator.load()
    Calibrator([w / 2 for w in default.weights], default.intercept, default.mean, default.scale,
               {"papers": "refactor_outputs.py: the default's weights halved"}, default.features).save(
                   folder / "calibrator.json")
    # an adapted reader: a run's answers marked correct by a pretend coder, one epoch on the tiny BERT
    sheet = folder / "coded.xlsx"
    assert main(["run", PAPERS, "--questions", str(tiny / "questions.yaml"), "--only", "q1,q2", "--no-normalize",
                 "--out", str(sheet), "--cache", str(folder / "cache"), "--no-progress"]) == 0
    import openpyxl
    book = openpyxl.load_workbook(sheet)
    answers = book["answers"]
    head = [c.value for c in answers[1]]
    for i, row in enumerate(answers.iter_rows(min_row=2)):
        row[head.index("correct")].value = "yes" if i % 2 == 0 else "no"
    book.save(sheet)
    assert main(["adapt", "--reader", str(tiny / "bert"), "--texts", PAPERS, "--coded", str(sheet),
                 "--questions", str(tiny / "questions.yaml"), "--out", str(folder / "adapted"), "--epochs", "1",
                 "--checkpoints", str(folder / "ck"), "--no-progress"]) == 0


def runs(p: Path) -> dict[str, list[str]]:
    q = ["--questions", str(p / "tiny/questions.yaml")]
    return {
        "default-nn": [PAPERS, *q, "--no-normalize"],
        "llm-q1q4": [PAPERS, *q, "--only", "q1,q4"],
        "fast-nn": [PAPERS, *q, "--preset", "fast", "--small-reader", str(p / "tiny/bert"), "--no-normalize"],
        "reference-q1q4": [PAPERS, *q, "--preset", "reference", "--only", "q1,q4"],
        "retrieve": [PAPERS, *q, "--read", "retrieve", "--budget", "3", "--no-normalize"],
        "study-nn": [PAPERS, "--questions", str(p / "study-tiny.yaml"), "--no-normalize"],
        "calibrator-adapted": [PAPERS, *q, "--only", "q1,q2,q3", "--no-normalize",
                               "--calibrator", str(p / "calibrator.json"), "--adapted", str(p / "adapted")],
    }


def record(folder: Path, out: Path, only: list[str]) -> None:
    """Each run twice (the second from the cache), with what it wrote and what its cache holds."""
    out.mkdir(parents=True, exist_ok=True)
    captured: dict = {}
    write_jsonl = export.WRITERS[".jsonl"]

    def capture(result, path):
        write_jsonl(result, path)
        info = result.info if isinstance(result.info, dict) else result.info.to_dict()
        captured["info"] = [[k, v] for k, v in info.items() if k not in TIMINGS]
        captured["run_rows"] = [r for r in export.run_rows(result) if r[0] not in TIMINGS]
        captured["papers"] = export.paper_rows(result)
        captured["freq"] = export.frequency_rows(result)
        captured["llm"] = result.llm_outputs
        captured["errors"] = result.errors

    export.WRITERS[".jsonl"] = capture

    class Recording(local.Pipeline):
        """The pipeline with every progress event it reports kept (sizing and loading ones too)."""

        def __init__(self, *args, on_progress=None, **kwargs):
            def record(event):
                captured.setdefault("events", []).append(repr(event))
                if on_progress:
                    on_progress(event)

            super().__init__(*args, on_progress=record, **kwargs)

    local.Pipeline = Recording
    for name, argv in runs(folder).items():
        if only and name not in only:
            continue
        cache = out / f"cache-{name}"
        shutil.rmtree(cache, ignore_errors=True)
        for attempt in ("", "-again"):
            captured.clear()
            jl = out / f"{name}{attempt}.jsonl"
            rc = main(["run", *argv, "--out", str(jl), "--cache", str(cache), "--no-progress"])
            (out / f"{name}{attempt}.meta.json").write_text(json.dumps({"rc": rc, **captured}, indent=1,
                                                                       default=str))
        con = sqlite3.connect(cache / "results.sqlite")
        rows = sorted(con.execute("select key, stage, value from results"))
        (out / f"{name}.keys.txt").write_text("".join(
            f"{k} {s} {hashlib.sha256(v.encode()).hexdigest()[:16]}\n" for k, s, v in rows))
        con.close()
        shutil.rmtree(cache)
        print(name, "rc", rc, "cache rows", len(rows), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "prep":
        prep(Path(sys.argv[2]).resolve())
    else:
        record(Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve(), sys.argv[4:])
