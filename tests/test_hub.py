"""Offline first run: one failed request to the Hub switches the run to offline mode, so a model that is not on
this machine fails at once with the loading message and how to bring models here (no retries per file)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mlpsych.hub import is_local

REPO = Path(__file__).resolve().parent.parent


class DeadHub:
    """A loopback port that accepts connections and closes them unanswered, counting them."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.server.settimeout(0.2)
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


def run_online(hub, model: str, tmp_path) -> subprocess.CompletedProcess:
    """`mlpsych run` on examples/papers, online against ``hub`` (closed after), with a question read by ``model``."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf"), MLPSYCH_CACHE=str(tmp_path / "cache"))
    questions = tmp_path / "q.yaml"
    questions.write_text("questions:\n  - id: q1\n    text: What software was used?\n"
                         f"    models: [{model}]\n", encoding="utf-8")
    try:
        return subprocess.run(
            [sys.executable, "-m", "mlpsych", "run", str(REPO / "examples" / "papers"), "--questions", str(questions),
             "--out", str(tmp_path / "out.xlsx"), "--no-progress", "--no-normalize"],
            env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )
    finally:
        hub.close()


def test_local_ids_never_ask_the_hub(tmp_path):
    assert is_local(str(tmp_path)) and is_local("./models/reader") and is_local("~/x")
    assert not is_local("deepset/deberta-v3-large-squad2")


@pytest.mark.slow
def test_unreachable_hub_means_one_request_then_the_offline_message(tmp_path):
    hub = DeadHub()
    done = run_online(hub, "somebody/reader-that-is-not-here", tmp_path)
    assert done.returncode == 2, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("mlpsych: error:")]
    assert len(error) == 1 and "Traceback" not in done.stderr
    # One error, then every missing model named and the ways forward (the command line's preflight message).
    assert "did not start" in error[0] and "somebody/reader-that-is-not-here" in done.stderr
    assert "cannot be reached" in done.stderr and "mlpsych dev tiny-models" in done.stderr
    assert hub.connections == 1  # the probe; no retries, no request per file


class NoSuchModelHub:
    """A Hub that answers: it is there (any request), and has no model of any id (the answer to a misspelt id)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:  # noqa: N802 - the probe
                self.send_response(200)
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802 - /api/models/<id>: no such repository
                self.send_response(404)
                self.send_header("X-Error-Code", "RepoNotFound")
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"error": "Repository not found"}')

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
def test_a_misspelt_hub_model_is_named_before_any_paper_is_read(tmp_path):
    """Online, a question file's misspelt model id ("deepset/roberta-large-sqad2") counted as a download: the run
    read the folder and the other questions' models first, and failed when loading it."""
    done = run_online(NoSuchModelHub(), "deepset/roberta-large-sqad2", tmp_path)
    assert done.returncode == 2, done.stderr
    assert "did not start" in done.stderr and "Traceback" not in done.stderr
    assert "- reader deepset/roberta-large-sqad2: the Hugging Face Hub has no model of that id" in done.stderr
    assert "read 4 document" not in done.stderr  # no paper was read
    assert "Ways forward" not in done.stderr  # bringing models here is no help for a misspelt id
