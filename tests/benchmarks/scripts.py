"""Benchmark scripts loaded as modules for their tests: benchmarks/ is a folder of scripts, not a package (and this
test folder's name would hide it as one)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(stem: str, name: str | None = None) -> ModuleType:
    """``benchmarks/<stem>.py`` as the module ``name`` (default ``stem``)."""
    spec = importlib.util.spec_from_file_location(name or stem, BENCHMARKS / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # before running it: its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
