"""`mlpsych cache info` and `mlpsych cache clear`: how big the result cache is, by stage and age, and removing part
of it (an interrupted thesis read's checkpoints, results of old runs) with the space given back."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mlpsych.errors import UserError

CACHE_HELP = "cache folder (default: $MLPSYCH_CACHE if set, else the per-user cache folder; the one runs use)"


def add_parser(subparsers) -> None:
    from mlpsych.cache import CHECKPOINT_STAGE
    from mlpsych.cache_admin import STAGES, UNKNOWN

    p = subparsers.add_parser(
        "cache", help="how big the result cache is, and clearing part of it",
        description="Every read, LLM output and interrupted read's checkpoint is kept in the result cache, so reruns "
                    "compute only what changed. `info` shows its size by stage and age, `clear` removes entries.")
    sub = p.add_subparsers(dest="cache_command", required=True)
    info = sub.add_parser("info", help="where the cache is, its size on disk, entries and bytes by stage, dates",
                          description="Where the result cache is, its size on disk, and per stage its entries, "
                                      "bytes and oldest and newest dates: what to decide what to clear from.")
    info.add_argument("--cache", type=Path, default=None, help=CACHE_HELP)
    info.set_defaults(func=run)

    stages = "; ".join(f"{name}: {what}" for name, what in STAGES.items())
    clear = sub.add_parser(
        "clear", help=f"remove entries (most often: --stage {CHECKPOINT_STAGE})",
        description=f"Remove the result cache's entries of the stages and age given (all of them without either) "
                    f"and give their space back. The common case: `mlpsych cache clear --stage {CHECKPOINT_STAGE}`, "
                    "the checkpoints of interrupted reads (megabytes each) that no rerun will take up. What is "
                    "removed is computed again by a run that needs it; a run using the cache meanwhile goes on. "
                    f"Stages: {stages}; {UNKNOWN}: entries of an older mlpsych without a stage.")
    clear.add_argument("--cache", type=Path, default=None, help=CACHE_HELP)
    clear.add_argument("--stage", nargs="+", action="extend", default=None, metavar="STAGE",
                       help=f"only these stages (default: every stage); e.g. {CHECKPOINT_STAGE}")
    clear.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                       help="only entries written more than DAYS days ago (default: whatever their age); entries of "
                            "an older mlpsych without a date are kept")
    clear.add_argument("--yes", action="store_true",
                       help="remove without asking (needed where there is no terminal to ask on)")
    clear.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mlpsych.cache import default_cache_dir

    directory = args.cache.expanduser() if args.cache else default_cache_dir()
    return info(directory) if args.cache_command == "info" else clear(directory, args)


def info(directory: Path) -> int:
    from mlpsych.cache import CHECKPOINT_STAGE
    from mlpsych.cache_admin import STAGES, UNKNOWN, stats

    found = stats(directory)
    if found is None:
        print(f"{no_cache(directory)} yet: a run stores its results there")
        return 0
    print(f"result cache: {found.path}")
    print(f"on disk: {size(found.disk_bytes)}"
          + (f", of which {size(found.free_bytes)} free (given back by the next clear)" if found.free_bytes else ""))
    print(f"{'stage':<16} {'entries':>9} {'size':>10}  {'oldest':<10}  newest")
    for row in [*found.stages, found.total]:
        print(f"{row.stage:<16} {row.entries:>9,} {size(row.bytes):>10}  {day(row.oldest):<10}  {day(row.newest)}")
    if found.total.undated:
        print(f"{entries(found.total.undated)} without a date (written by an older mlpsych): --older-than keeps them")
    described = {**STAGES, UNKNOWN: "entries of an older mlpsych, without a stage"}
    for row in found.stages:
        print(f"  {row.stage}: {described.get(row.stage, 'written by another mlpsych version')}")
    if any(row.stage == CHECKPOINT_STAGE for row in found.stages):
        print(f"checkpoints no rerun will take up: mlpsych cache clear --stage {CHECKPOINT_STAGE} "
              "(with --older-than DAYS to keep recent ones)")
    if found.others:
        print("also in the folder, not results (clear leaves them): "
              + ", ".join(f"{name} {size(bytes_)}" for name, bytes_ in found.others.items()))
    return 0


def clear(directory: Path, args: argparse.Namespace) -> int:
    from mlpsych.cache_admin import Selection, clear as clear_cache, matching

    selection = Selection(frozenset(args.stage) if args.stage else None, args.older_than)
    found = matching(directory, selection)
    if found is None:
        print(f"{no_cache(directory)}: nothing to clear")
        return 0
    what = describe(selection)
    if found.entries and not args.yes:
        question = f"{entries(found.entries)} ({size(found.bytes)}){what} from {directory}"
        if not sys.stdin.isatty():
            raise UserError(f"cache clear would remove {question}: add --yes to remove them (no terminal to ask on)")
        answer = input(f"remove {question}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return 0
    done = clear_cache(directory, selection)
    assert done is not None  # the file was there a moment ago; a run never removes it
    if done.entries:
        print(f"removed {entries(done.entries)} ({size(done.bytes)}){what}")
    else:
        print(f"nothing to remove: no entries{what}")
    print(f"on disk: {size(done.disk_before)} before, {size(done.disk_after)} now")
    if done.not_reclaimed:
        print(f"the space was not given back now ({done.not_reclaimed}): runs reuse it, and the next clear gives it "
              "back")
    return 0


def describe(selection) -> str:
    """`` of stage read-checkpoint, written before 2026-10-29`` (empty for every entry)."""
    parts = []
    if selection.stages:
        parts.append(f" of stage{'s' if len(selection.stages) > 1 else ''} {', '.join(sorted(selection.stages))}")
    if selection.cutoff is not None:
        parts.append(f" written before {day(selection.cutoff, '%Y-%m-%d %H:%M')}")
    return ",".join(parts)


def no_cache(directory: Path) -> str:
    where = "" if directory.is_dir() else " (no such folder)"
    return f"no result cache in {directory}{where}"


def entries(count: int) -> str:
    return f"{count:,} entr{'y' if count == 1 else 'ies'}"


def size(count: int) -> str:
    """Bytes as a disk reports them (1 MB = 1,000,000 bytes)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def day(moment: float | None, pattern: str = "%Y-%m-%d") -> str:
    return "-" if moment is None else time.strftime(pattern, time.localtime(moment))
