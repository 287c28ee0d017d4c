"""How long `read_sheet` (what `mlpsych agree`, `calibrate`, `adapt --coded`, `eval --pred` and a rerun's check for
coding read a results workbook with) takes for one sheet, read alone (mlpsych.workbook) and as it was read before,
by openpyxl's read-only reader; the two readings' rows compared.

    PYTHONPATH=. python benchmarks/read_sheet.py big.xlsx                        # the answers sheet
    PYTHONPATH=. python benchmarks/read_sheet.py big.xlsx --sheet model_answers --repeats 3

The workbook is only read. Each reading runs ``--repeats`` times, alternating; the medians of wall and CPU seconds
are reported (each run as wall/CPU).
"""
from __future__ import annotations

import argparse
import io
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpsych.evaluation.evaluate import read_sheet


def openpyxl_rows(source: Path | bytes, sheet: str) -> list[dict[str, Any]]:
    """A workbook sheet's rows as ``read_sheet`` read them through openpyxl's read-only reader (``data_only``) up to
    this change: the reference the fast reading must equal, and the "before" timed here."""
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(source) if isinstance(source, bytes) else source, read_only=True, data_only=True)
    try:
        values = book[sheet].iter_rows(values_only=True)
        header = next(values, None)
        if not header:
            return []
        names = [str(h).strip().lower() if h is not None else "" for h in header]
        rows = []
        for number, cells in enumerate(values, 2):
            if cells is None or all(c is None or str(c).strip() == "" for c in cells):
                continue
            rows.append({name: cell for name, cell in zip(names, cells) if name} | {"_row": number})
        return rows
    finally:
        book.close()


@dataclass
class Timing:
    wall: float  # seconds
    cpu: float  # this process's CPU seconds: less swayed by other work on the machine


def timed(read, *args) -> tuple[Timing, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = read(*args)
    return Timing(time.perf_counter() - wall, time.process_time() - cpu), result


def summary(timings: list[Timing]) -> str:
    return (f"median {statistics.median(t.wall for t in timings):.2f} s wall, "
            f"{statistics.median(t.cpu for t in timings):.2f} s CPU  "
            f"({', '.join(f'{t.wall:.2f}/{t.cpu:.2f}' for t in timings)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workbook", type=Path)
    parser.add_argument("--sheet", default="answers")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    before: list[Timing] = []
    after: list[Timing] = []
    for _ in range(args.repeats):
        timing, old = timed(openpyxl_rows, args.workbook, args.sheet)
        before.append(timing)
        timing, new = timed(read_sheet, args.workbook, args.sheet, True)
        after.append(timing)
    print(f"{args.workbook} ({args.workbook.stat().st_size / 1e6:.1f} MB), sheet {args.sheet!r}: {len(new)} rows, "
          f"{'equal' if new == old else 'DIFFERENT'} to openpyxl's")
    print(f"openpyxl read-only: {summary(before)}")
    print(f"read_sheet now:     {summary(after)}")


if __name__ == "__main__":
    main()
