"""Every exception mlpsych raises on purpose, and how a failure reads where a user sees it.

Two kinds: mistakes that concern the whole run stop it with one line (``UserError`` at the command line, the
others turned into it), and a paper's own failure becomes that paper's status (``one_line``) while the other
papers go on (see ``Pipeline``, ``export`` and ``ingest``).
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix (missing folder, bad question file, unknown model): printed as one line."""


class UnknownChoice(UserError):
    """A name that is not among the known choices (a preset, a merging rule, a question kind); the message lists
    the known ones."""


class IngestError(Exception):
    """A file that cannot be turned into text; the message is the short per-file status shown to the user."""


class QuestionFileError(ValueError):
    """A question file that cannot be used; the message names the file, the question and the field."""


class ModelLoadError(RuntimeError):
    """A model that cannot be loaded; the message says which and what to do. Stops the run (every paper needs it)."""


class NormalizerUnavailable(RuntimeError):
    """The LLM cannot be used here; the message says why and how to enable it (the run goes on without it)."""


class EngineError(RuntimeError):
    """An engine that cannot run as asked (Ray missing, cluster unreachable); the message says what to do."""


class EvalInputError(ValueError):
    """An input file the user gave cannot be read as expected (shown as a one-line error by the CLI)."""


class AppInputError(ValueError):
    """A user mistake the page shows as a one-line message (never a traceback)."""


def one_line(error: BaseException) -> str:
    """``"ValueError: bad offsets"``: the class and the first line of the message, never a traceback."""
    message = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
