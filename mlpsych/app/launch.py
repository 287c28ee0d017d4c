"""How `mlpsych app` starts the page: Streamlit's own `streamlit run` of the page that ships in the package, with
the server settings a checkout reads from .streamlit/config.toml (an installed mlpsych has no such file).

Streamlit is imported only once it is known to be installed, so that a missing one is a line saying how to install it.
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import os
import socket
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


PORTS_TRIED = 100  # the ports after a taken one searched for a free one to suggest


def port_refused(port: int, address: str) -> int | None:
    """Why Streamlit could not listen on ``port`` at ``address``: ``errno.EADDRINUSE`` (a server listens there) or
    ``errno.EACCES`` (a port this user may not open: below 1024 on most systems), else None. Each address the name
    stands for is bound with the options Streamlit's server sets, so a port Streamlit could take is free here. An
    address this machine does not have is not refused here: Streamlit's own error on it is reported by
    :func:`serve`."""
    try:
        found = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return None
    for family, kind, proto, _, where in found:
        try:
            probe = socket.socket(family, kind, proto)
        except OSError:  # a family this machine lacks (no IPv6)
            continue
        with probe:
            if os.name != "nt":  # a port left in TIME_WAIT by a stopped page is free to Streamlit too
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):  # "::" is IPv4's wildcard too
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                probe.bind(where)
            except OSError as error:
                if error.errno in (errno.EADDRINUSE, errno.EACCES):
                    return error.errno
    return None


def check_port(port: int | None, address: str | None = None) -> None:
    """A UserError when the port asked for is taken (most often by another `mlpsych app`) or not this user's to
    open, naming a free one: Streamlit would log "Port N is not available" or "Permission denied" among its
    start-up lines and exit 1. Without --port, Streamlit takes the next free port itself."""
    if port is None:
        return
    where = address or str(SERVER_OPTIONS["server.address"])
    refused = port_refused(port, where)
    if refused is None:
        return
    first = max(port + 1, 1024)  # a user refused a low port is refused them all
    free = next((p for p in range(first, min(first + PORTS_TRIED, 65536)) if port_refused(p, where) is None), None)
    instead = f"--port {free}" if free else "another --port"
    if refused == errno.EACCES:
        raise UserError(f"port {port} may not be opened by this user (ports below 1024 need administrator "
                        f"rights): pass {instead}")
    raise UserError(f"port {port} is in use (another `mlpsych app`?): stop it or pass {instead}")


def serve(port: int | None = None, address: str | None = None) -> int:
    """Run the page until the server stops, in this process (Streamlit's own command, so Ctrl-C or a kill stops
    the server as it stops itself, deleting the session's uploads, and leaves no server behind)."""
    require_streamlit()
    check_port(port, address)
    from streamlit.web import cli as streamlit_cli

    args = streamlit_args(port, address)
    log.debug("streamlit %s", " ".join(args))
    try:
        return int(streamlit_cli.main(args=args, prog_name="streamlit", standalone_mode=False) or 0)
    except OSError as error:  # the server cannot listen there: a name that is no host, another machine's address
        where = address or SERVER_OPTIONS["server.address"]
        raise UserError(f"cannot start the page on {where}: {error.strerror or one_line(error)}; --address takes "
                        "a name or address of this machine (localhost, or 0.0.0.0 for every interface)") from None
