"""How `mlpsych app` starts the page: Streamlit's own `streamlit run` of the page that ships in the package, with
the server settings a checkout reads from .streamlit/config.toml (an installed mlpsych has no such file).

Streamlit is imported only once it is known to be installed, so that a missing one is a line saying how to install it.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from mlpsych.app.logic import MAX_UPLOAD_MB
from mlpsych.errors import UserError, one_line

log = logging.getLogger(__name__)

PAGE = Path(__file__).with_name("page.py")
INSTALL_HELP = 'pip install "mlpsych[app]"'
# The server as the checkout's .streamlit/config.toml sets it (a test keeps the two equal): only this machine can
# open the page (it reads any folder here), no browser opened by the server, no file watching, no telemetry.
SERVER_OPTIONS: dict[str, object] = {
    "server.address": "localhost",
    "server.maxUploadSize": MAX_UPLOAD_MB,
    "server.headless": True,
    "server.fileWatcherType": "none",
    "browser.gatherUsageStats": False,
    "client.toolbarMode": "minimal",
}


def require_streamlit() -> None:
    """A UserError naming the extra to install when Streamlit or pandas (the ``app`` extra) is missing: found
    before a server starts, not as a traceback in the browser."""
    missing = [name for name in ("streamlit", "pandas") if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"mlpsych app needs {' and '.join(missing)}, which is not installed: {INSTALL_HELP}")


def _flag_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def streamlit_args(port: int | None = None, address: str | None = None) -> list[str]:
    """The arguments of `streamlit run` for the installed page; without a port, Streamlit takes 8501 or the next
    free one."""
    options = dict(SERVER_OPTIONS)
    if address:
        options["server.address"] = address
    if port is not None:
        options["server.port"] = port
    return ["run", str(PAGE), *(part for name, value in options.items() for part in (f"--{name}", _flag_value(value)))]


def serve(port: int | None = None, address: str | None = None) -> int:
    """Run the page until the server stops, in this process (Streamlit's own command, so Ctrl-C or a kill stops
    the server as it stops itself, deleting the session's uploads, and leaves no server behind)."""
    require_streamlit()
    from streamlit.web import cli as streamlit_cli

    args = streamlit_args(port, address)
    log.debug("streamlit %s", " ".join(args))
    try:
        return int(streamlit_cli.main(args=args, prog_name="streamlit", standalone_mode=False) or 0)
    except OSError as error:  # the server cannot listen there: a name that is no host, another machine's address
        where = address or SERVER_OPTIONS["server.address"]
        raise UserError(f"cannot start the page on {where}: {error.strerror or one_line(error)}; --address takes "
                        "a name or address of this machine (localhost, or 0.0.0.0 for every interface)") from None
