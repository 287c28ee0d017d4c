"""How a failure reads where a user sees it: one line, the exception's class and its message.

A paper whose ingestion, reading, normalization, multi-hop or export raised keeps that line as its status in the
papers sheet and the log, and the run goes on with the other papers (see ``Pipeline`` and ``export``).
"""

from __future__ import annotations


def one_line(error: BaseException) -> str:
    """``"ValueError: bad offsets"``: the class and the first line of the message, never a traceback."""
    message = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
