"""Which mlpsych made a result: the commit of a checkout, "dirty" for changes, the plain version elsewhere."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mlpsych import __version__
from mlpsych.provenance import version

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout.strip()


@needs_git
def test_a_checkout_names_its_commit_and_its_changes(tmp_path: Path) -> None:
    """Every commit said 0.1.0: a run sheet, a reader folder or a bug report could not tell which code made it."""
    checkout = tmp_path / "checkout"
    (checkout / "mlpsych").mkdir(parents=True)
    (checkout / "mlpsych" / "x.py").write_text("A = 1\n")
    _git(checkout, "init", "-q")
    _git(checkout, "add", ".")
    _git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    commit = _git(checkout, "rev-parse", "--short=12", "HEAD")
    assert version(checkout) == f"{__version__}+git.{commit}"
    (checkout / "mlpsych" / "x.py").write_text("A = 2\n")
    (checkout / "notes.txt").write_text("a file of the lab's, not mlpsych's")
    version.cache_clear()
    assert version(checkout) == f"{__version__}+git.{commit}.dirty"


def test_an_installed_package_or_an_unreadable_checkout_gives_the_version(tmp_path: Path) -> None:
    (tmp_path / "site-packages" / "mlpsych").mkdir(parents=True)
    assert version(tmp_path / "site-packages") == __version__
    (tmp_path / "broken" / "mlpsych").mkdir(parents=True)
    (tmp_path / "broken" / ".git").write_text("gitdir: /nowhere\n")  # a worktree whose repository is gone
    assert version(tmp_path / "broken") == __version__
