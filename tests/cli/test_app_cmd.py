"""`mlpsych app`: the page that ships in the package, started with Streamlit from an installed mlpsych (the wheel had
no page, and no command to start one)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import mlpsych
from mlpsych.app import launch
from mlpsych.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]


def options(args: list[str]) -> dict[str, str]:
    """`--name value` pairs of a `streamlit run` argument list."""
    assert args[:2] == ["run", str(launch.PAGE)] and len(args) % 2 == 0, args
    return {name.removeprefix("--"): value for name, value in zip(args[2::2], args[3::2])}


def test_the_page_ships_inside_the_package():
    package = Path(mlpsych.__file__).parent
    assert launch.PAGE == package / "app" / "page.py" and launch.PAGE.is_file()
    assert "from mlpsych.app.page import main" in (REPO / "app.py").read_text(encoding="utf-8")  # no second copy


def test_port_and_address_reach_streamlit():
    args = build_parser().parse_args(["app", "--port", "8600", "--host", "0.0.0.0"])
    assert (args.port, args.address) == (8600, "0.0.0.0")
    assert build_parser().parse_args(["app", "--address", "127.0.0.1"]).address == "127.0.0.1"
    given = options(launch.streamlit_args(args.port, args.address))
    assert (given["server.port"], given["server.address"]) == ("8600", "0.0.0.0")


def test_by_default_only_this_machine_and_streamlit_picks_the_port():
    args = build_parser().parse_args(["app"])
    given = options(launch.streamlit_args(args.port, args.address))
    assert "server.port" not in given  # Streamlit then takes 8501 or the next free one
    assert given["server.address"] == "localhost"
    assert given["server.maxUploadSize"] == str(launch.SERVER_OPTIONS["server.maxUploadSize"])
    assert given["browser.gatherUsageStats"] == "false" and given["server.headless"] == "true"


@pytest.mark.parametrize("port", ["0", "70000", "web"])
def test_a_bad_port_is_one_line(port, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["app", "--port", port])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a port number (1-65535)" in err[0], err


@pytest.mark.parametrize("missing", ["streamlit", "pandas"])
def test_without_the_app_extra_one_line_says_what_to_install(missing, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, missing, None)  # as if not installed: find_spec and import see nothing
    assert main(["app"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f'mlpsych: error: mlpsych app needs {missing}, which is not installed: pip install "mlpsych[app]"']


def test_a_port_in_use_is_one_line_naming_a_free_one(monkeypatch, capsys):
    """`mlpsych app --port N` with N taken (another `mlpsych app` left running) printed Streamlit's start-up lines
    and "Port N is not available", with exit code 1; the port is now checked before Streamlit starts."""
    def no_streamlit(*args, **kwargs):
        raise AssertionError("Streamlit was started")

    monkeypatch.setattr(launch, "require_streamlit", lambda: None)
    monkeypatch.setattr(launch, "streamlit_args", no_streamlit)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert launch.port_refused(port, "localhost") == errno.EADDRINUSE
        assert main(["app", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    prefix = f"mlpsych: error: port {port} is in use (another `mlpsych app`?): stop it or pass --port "
    assert err[0].startswith(prefix), err
    suggested = int(err[0].removeprefix(prefix))
    assert suggested > port and launch.port_refused(suggested, "localhost") is None


def test_a_port_this_user_may_not_open_is_one_line_naming_one_above_1023(monkeypatch, capsys):
    """A port below 1024 without administrator rights gave Streamlit's "Permission denied" and exit 1. (The
    machine's own refusal cannot be had as root, which CI may be: the socket refuses as the kernel does.)"""
    class Unprivileged(socket.socket):
        def bind(self, where):
            if where[1] < 1024:
                raise PermissionError(errno.EACCES, "Permission denied")
            return super().bind(where)

    monkeypatch.setattr(launch, "require_streamlit", lambda: None)
    monkeypatch.setattr(launch.socket, "socket", Unprivileged)
    assert launch.port_refused(80, "localhost") == errno.EACCES
    assert main(["app", "--port", "80"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    prefix = ("mlpsych: error: port 80 may not be opened by this user (ports below 1024 need administrator rights): "
              "pass --port ")
    assert len(err) == 1 and err[0].startswith(prefix), err
    assert int(err[0].removeprefix(prefix)) >= 1024


@pytest.mark.slow
@pytest.mark.parametrize("address", ["198.51.100.7", "nosuch.invalid"])  # another machine's address; no host
def test_an_address_the_page_cannot_listen_on_is_one_line(address, tmp_path):
    """Was "gaierror: Name or service not known" / "OSError: Cannot assign requested address", called a bug in
    mlpsych. (A process of its own: Streamlit's start changes sys.argv and its config for the whole process.)"""
    pytest.importorskip("streamlit")
    done = subprocess.run([sys.executable, "-m", "mlpsych.cli", "app", "--address", address, "--port",
                           str(_free_port())], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith(f"mlpsych: error: cannot start the page on {address}: ") and "--address takes" in error
    assert "bug" not in done.stderr


def _outward_address() -> str | None:
    """This machine's address on its network (not loopback), or None where it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the interface a route would use
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_mlpsych_app_serves_the_page_and_ctrl_c_stops_it(tmp_path):
    """The command as a researcher runs it, outside the checkout: the page answers here, not to other machines of
    the network (Streamlit's default listened on every interface), and Ctrl-C (sent to the terminal's process
    group) stops the server with exit code 0, leaving nothing running."""
    pytest.importorskip("streamlit")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "MLPSYCH_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen([sys.executable, "-m", "mlpsych.cli", "app", "--port", str(port)], cwd=tmp_path,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, health = time.monotonic() + 90, None
        while health is None and time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=2) as response:
                    health = response.read().decode()
            except OSError:
                time.sleep(0.5)
        assert health == "ok", process.poll()
        outward = _outward_address()
        if outward:
            with pytest.raises(OSError):
                socket.create_connection((outward, port), timeout=5).close()
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = process.stdout.read().decode()
    assert f"localhost:{port}" in output and "Traceback" not in output, output
