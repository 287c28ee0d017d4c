"""Shared fixtures: tiny offline models of every family, the question file that points at them, examples/."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

from mlpsych.dev.tiny import build_tiny_models, write_tiny_question_file

REPO_ROOT = Path(__file__).resolve().parent.parent

# optional_parts: the end-of-run list of what was skipped and how to enable it; pytester: tests of that list.
pytest_plugins = ["optional_parts", "pytester"]

# Tests never reach the Hub (set before huggingface_hub reads it), and never touch the user's cache folder.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True, scope="session")
def _private_default_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["MLPSYCH_CACHE"] = str(tmp_path_factory.mktemp("default-cache"))


@pytest.fixture(scope="session")
def batching_atol() -> Callable[[object], float]:
    """dtype -> absolute tolerance between unit-size outputs of one input computed alone and in a padded batch.

    float32 differs only in summation order (1e-5 is about 100 of its ulps at 1.0); bf16 and fp16 round every
    layer's output to 8 or 11 bits, so one input may differ by a few of their ulps (4 eps: 0.03 in bf16).
    """
    import torch

    return lambda dtype: max(1e-5, 4 * torch.finfo(dtype).eps)


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tiny models live: $MLPSYCH_TINY_DIR (kept between sessions, so reuse is instant) or a temp dir."""
    configured = os.environ.get("MLPSYCH_TINY_DIR")
    return Path(configured) if configured else tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_models(tiny_models_dir: Path) -> dict[str, Path]:
    """family -> directory of a tiny random-weight model, built once per test session."""
    return build_tiny_models(tiny_models_dir)


@pytest.fixture(scope="session")
def tiny_questions(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """questions/mlpsych.yaml with the Hub ids replaced by the tiny models' paths."""
    return write_tiny_question_file(tmp_path_factory.mktemp("tiny-questions"), tiny_models)


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    """The repository's examples/ folder (small papers written for this project)."""
    return REPO_ROOT / "examples"


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray instance with two CPUs, started once (or the one already running in this process)."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()
