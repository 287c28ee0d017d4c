"""Which mlpsych made a result: the version, and the git commit where it runs from a checkout."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from mlpsych import __version__

CHECKOUT = Path(__file__).resolve().parent.parent


@functools.cache
def version(checkout: Path = CHECKOUT) -> str:
    """``__version__``, with the commit (and ``.dirty`` where the package's files differ from it) when mlpsych runs
    from a git checkout, as the README's `pip install -e .` installs it: ``0.1.0+git.1a2b3c4d5e6f``. Every commit
    said 0.1.0, so a run sheet, a reader folder or a bug report could not tell which code made it. An installed
    wheel, or a checkout git cannot read, gives ``__version__``."""
    if not (checkout / ".git").exists() or not (checkout / "mlpsych").is_dir():
        return __version__
    try:
        commit = _git(checkout, "rev-parse", "--short=12", "HEAD")
        changed = _git(checkout, "status", "--porcelain", "--untracked-files=no", "--", "mlpsych", "questions")
    except (OSError, subprocess.SubprocessError):  # no git here, or not a repository it can read
        return __version__
    return f"{__version__}+git.{commit}" + (".dirty" if changed else "")


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()
