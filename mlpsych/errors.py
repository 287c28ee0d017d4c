"""Every exception mlpsych raises on purpose, and how a failure reads where a user sees it.

Two kinds: mistakes that concern the whole run stop it with one line (every ``UserError``: the front ends catch
those and only those, so that anything else shows as a bug with where to report it), and a paper's own failure becomes that paper's status (``one_line``) while the other
papers go on (see ``Pipeline``, ``export`` and ``ingest``).
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix (missing folder, bad question file, unknown model): printed as one line."""


class UnknownChoice(UserError):
    """A name that is not among the known choices (a preset, a merging rule, a question kind); the message lists
    the known ones."""


class InputError(UserError):
    """Papers or files the run cannot start from: a missing path, a folder with no papers, an unknown cleaning step."""


class BackendUnavailable(UserError):
    """A PDF backend that was asked for by name and cannot be used here; the message says why."""


class SettingsError(UserError):
    """A settings value the settings refuse (out of range, wrong type); the message names the field, and ``field``
    (its name), ``value`` and ``reason`` let a front end name its own switch instead."""

    def __init__(self, field: str, value: object, reason: str):
        super().__init__(f"setting {field}: {reason} (got {value!r})")
        self.field, self.value, self.reason = field, value, reason


class IngestError(Exception):
    """A file that cannot be turned into text; the message is the short per-file status shown to the user."""


class QuestionFileError(UserError, ValueError):
    """A question file that cannot be used; the message names the file, the question and the field."""


class CacheError(UserError):
    """The result cache cannot be opened, read or written (a folder that takes no file, a full disk, a damaged
    file): it concerns every paper, so it stops the run (like a model that cannot be loaded) instead of becoming
    every paper's status with its computed answers dropped; what was stored before stays."""


class OutputError(UserError):
    """An output file that cannot be written (a full disk, a file another program holds open); the message names
    the file and why. A good file already there is left as it was."""


def cannot_write(path: object, error: OSError) -> OutputError:
    """How an output that cannot be written reads: the file, the system's reason, and what to do where it is a file
    held open (Windows refuses to replace a file a spreadsheet program has open)."""
    held = " (if it is open in a spreadsheet program, close it)" if isinstance(error, PermissionError) else ""
    return OutputError(f"{path} cannot be written ({error.strerror or error}){held}")


class ModelLoadError(RuntimeError):
    """A model that cannot be loaded; the message says which and what to do. Stops the run (every paper needs it)."""


class NormalizerUnavailable(RuntimeError):
    """The LLM cannot be used here; the message says why and how to enable it (the run goes on without it)."""


class EngineError(RuntimeError):
    """An engine that cannot run as asked (Ray missing, cluster unreachable); the message says what to do."""


class EvalInputError(UserError, ValueError):
    """An input file the user gave cannot be read as expected (shown as a one-line error by the CLI)."""


class PapersNotInTexts(EvalInputError):
    """Coding or gold names papers the texts given do not hold; ``papers`` are their ids (a command that knows which
    of its texts could not be read says so: a sheet of the right corpus then looks like one of another)."""

    def __init__(self, message: str, papers: list[str]) -> None:
        super().__init__(message)
        self.papers = papers


class AppInputError(UserError, ValueError):
    """A user mistake the page shows as a one-line message (never a traceback)."""


def bug_report(what_ran: str, how_to_see: str) -> str:
    """What a front end says under a failure that is not a user's mistake: a bug, and how to report it (the
    version with it: a report without one cannot be told from a fault fixed since)."""
    from mlpsych.provenance import version

    return (f"this is a bug in mlpsych {version()}, not a mistake in what you asked: please report it to the "
            f"mlpsych maintainers with {what_ran} and the traceback ({how_to_see} to see it)")


def one_line(error: BaseException) -> str:
    """``"ValueError: bad offsets"``: the class and the first line of the message, never a traceback."""
    message = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
