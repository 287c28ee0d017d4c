"""A result cache file with entries of every stage and several ages (and an older version's without a stage or
a date), written through ResultCache and dated in SQL: what the cache's info and clear are tested on."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from mlpsych.cache import ResultCache
from mlpsych.cache_admin import DAY

NOW = 1_790_000_000.0  # a fixed "now" (2026-09-21): every entry's age is set from it
# key -> (stage, age in days (None: no date, as an older version might leave it), characters of its value)
ENTRIES = {
    "read-old": ("read", 40, 300),
    "read-new": ("read", 1, 200),
    "llm-old": ("normalize", 40, 100),
    "llm-new": ("normalize", 2, 150),
    "checkpoint-old": ("read-checkpoint", 30, 3000),
    "checkpoint-new": ("read-checkpoint", 0.01, 2000),
    "legacy-undated": ("", None, 50),
    "legacy-dated": ("", 100, 70),
}


def value(size: int) -> dict:
    return {"spans": "é" * size}  # not ASCII: sizes are of the UTF-8 bytes


def entry_bytes(key: str) -> int:
    return len(key) + len(json.dumps(value(ENTRIES[key][2]), ensure_ascii=False).encode("utf-8"))


def fill(folder: Path, entries: dict = ENTRIES, now: float = NOW) -> Path:
    """A cache holding ``entries``, each written ``age`` days before ``now``."""
    cache = ResultCache(folder)
    for key, (stage, _, size) in entries.items():
        cache.put(key, value(size), stage=stage)
    cache.close()
    with closing(sqlite3.connect(folder / "results.sqlite")) as db, db:
        for key, (_, age, _) in entries.items():
            db.execute("UPDATE results SET created = ? WHERE key = ?", (None if age is None else now - age * DAY, key))
    return folder


def keys(folder: Path) -> set[str]:
    with closing(sqlite3.connect(folder / "results.sqlite")) as db:
        return {row[0] for row in db.execute("SELECT key FROM results")}
