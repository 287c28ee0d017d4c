"""Windows per second of the extractive reader, for a model and batch size.

    python benchmarks/reader_speed.py --model deepset/deberta-v3-large-squad2 --batch-size 8 --device cuda
    python benchmarks/reader_speed.py --tiny deberta-v2 --size large      # random weights, real architecture

Reads the same text (an MLPsych paper with --data, else the examples) for one question, after one warm-up
window batch, and prints windows/s, seconds per paper and the window count. Prints measurements, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from mlpsych.documents import Document
from mlpsych.reader import Query, Reader, ReaderSettings

QUESTION = "What machine learning or natural language processing techniques were used?"


def paper(data: Path | None, index: int) -> Document:
    if data:
        texts = json.loads(json.loads((data / "text.json").read_text()))
        key = sorted(texts)[index]
        return Document(id=key, text=texts[key])
    folder = Path(__file__).resolve().parent.parent / "examples" / "papers"
    return Document(id="examples", text="\n\n".join(p.read_text() for p in sorted(folder.glob("*.txt"))))


def tiny_model(family: str, size: str) -> str:
    from mlpsych import testing

    out = Path(tempfile.mkdtemp(prefix="mlpsych-speed-"))
    if size == "tiny":
        return str(testing.build_tiny_model(family, out / family))
    builder = getattr(testing, "build_model_with_config", None)
    if builder is None:
        raise SystemExit("this checkout's mlpsych.testing has no build_model_with_config; use --size tiny")
    return str(builder(family, out / family, size=size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="Hub id or folder of a SQuAD2 model")
    parser.add_argument("--tiny", help="build a random-weight model of this family instead (deberta-v2, albert, ...)")
    parser.add_argument("--size", default="tiny", help="with --tiny: tiny, or a real configuration size (large)")
    parser.add_argument("--data", type=Path, help="MLPsych folder (text.json); default: the examples")
    parser.add_argument("--paper", type=int, default=0, help="which MLPsych paper (sorted ids)")
    parser.add_argument("--max-windows", type=int, default=0, help="cut the paper to about this many windows")
    parser.add_argument("--batch-size", type=int, nargs="+", default=[8])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    args = parser.parse_args()
    if not (args.model or args.tiny):
        parser.error("give --model or --tiny")
    model = args.model or tiny_model(args.tiny, args.size)
    doc = paper(args.data, args.paper)
    for batch_size in args.batch_size:
        reader = Reader(model, ReaderSettings(batch_size=batch_size, device=args.device, dtype=args.dtype))
        reader.warm_up()
        if args.max_windows:
            windows = reader.windows(doc)[: args.max_windows]
            doc = Document(id=doc.id, text=doc.text[: windows[-1].char_end])
        n_windows = len(reader.windows(doc))
        warm = Query("w", QUESTION, 5, 30, windows=(0,))
        reader.run(doc, [warm])
        reader.windows_read = 0
        started = time.perf_counter()
        reader.run(doc, [Query("q1", QUESTION, 20, 30)])
        seconds = time.perf_counter() - started
        print(f"model={Path(model).name} device={reader.device} dtype={next(reader.model.parameters()).dtype} "
              f"batch={batch_size} windows={reader.windows_read} ({n_windows} in paper) "
              f"seconds={seconds:.2f} windows/s={reader.windows_read / seconds:.2f} "
              f"tokens/paper={len(reader.encode(doc).ids)}")
        reader.release()


if __name__ == "__main__":
    main()
