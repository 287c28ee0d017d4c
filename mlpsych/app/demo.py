"""The way forward on a machine without the real models: tiny random-weight models, built here in seconds.

Their answers are meaningless; they show how the app works end to end (upload, run, results, downloads) on the
user's own papers, without a download.
"""

from __future__ import annotations

import os
from pathlib import Path


def tiny_dir() -> Path:
    """Where the tiny models are kept: ``$MLPSYCH_TINY_DIR`` (shared with the tests) or the user's cache folder."""
    configured = os.environ.get("MLPSYCH_TINY_DIR")
    if configured:
        return Path(configured).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("mlpsych")) / "tiny-models"


def demo_question_file(folder: Path | None = None) -> Path:
    """The library's questions with the tiny models as readers and LLM (built on first use, reused after)."""
    from mlpsych.dev.tiny import build_tiny_models, write_tiny_question_file

    root = folder or tiny_dir()
    return write_tiny_question_file(root / "questions", build_tiny_models(root))


def demo_small_reader(folder: Path | None = None) -> Path:
    """The tiny BERT reader, as the fast preset's small reader of a demo run (reused once built)."""
    from mlpsych.dev.tiny import build_tiny_models

    return build_tiny_models(folder or tiny_dir())["bert"]
