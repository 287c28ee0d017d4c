"""The Streamlit app: the page (``page``, which ships in the package; ``mlpsych app`` runs it with ``launch``, a
checkout's ``app.py`` too) over plain, testable modules.

``logic`` (uploads, question templates and the form, presets), ``preflight`` (are the run's models here?),
``runner`` (one run, as a record), ``estimate`` (progress and time left from the pipeline's events), ``results``
(the tables, filters and downloads), ``demo`` (the tiny models as a way forward).
"""

from __future__ import annotations

import os


def leave_sys_path(path: list[str], page: str) -> None:
    """Remove the folder of ``page`` from ``path`` (``sys.path``), where Streamlit put it first: it runs a script
    with its folder there, which for the page is this package's, and made its modules importable as top-level
    ``logic``, ``results``, ``review`` ..., shadowing installed packages of those names. Only entries naming that
    folder go (``streamlit run mlpsych/app/page.py`` puts it as given, relative, and again absolute)."""
    folder = os.path.dirname(os.path.abspath(page))
    for entry in [e for e in path if e and os.path.abspath(e) == folder]:
        path.remove(entry)
