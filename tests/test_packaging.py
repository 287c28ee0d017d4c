"""The wheel's package list names every package folder, so nothing is left out of a built wheel (the wheel itself
is built, installed outside the checkout and run by .ci/wheel_check.sh)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_in_the_wheel():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "mlpsych").rglob("__init__.py")}
    assert on_disk <= listed, f"add to pyproject.toml's packages: {sorted(on_disk - listed)}"
    assert config["package-dir"]["mlpsych.library"] == "questions"
    assert (REPO / "questions" / "mlpsych.yaml").is_file()
