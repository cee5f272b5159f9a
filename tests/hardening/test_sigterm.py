"""SIGTERM on a real `curator serve` process: new connections are refused at once, a held
stream still finishes, the audit queue is flushed, and the process exits 0 within
`server.shutdown_grace_s`; a stream that outlives the grace is cut, not waited for."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.fakes.servers import HOST
from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.support import CHAT, WAIT_S, chat_body, wait_for

START_S = 60.0
"""Bound for the process to start answering (tokenizers load first); not a speed check."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
    return port


def _config(tmp_path: Path, fake: FakeOpenAI, grace_s: float) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            server: {{shutdown_grace_s: {grace_s}}}
            upstreams:
              fake: {{base_url: "{fake.origin}/v1", api_key: "sk-upstream-sigterm"}}
            policies:
              off: preset:passthrough
            routes:
              - {{name: default, upstream: fake, policy: "off"}}
            audit: {{sink: jsonl, path: audit.jsonl}}
            metrics: {{enabled: false}}
            """
        )
    )
    return path


class Served:
    """A `curator serve` subprocess on a free loopback port."""

    def __init__(self, config: Path) -> None:
        self.port = _free_port()
        self.origin = f"http://{HOST}:{self.port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [
            sys.executable,
            "-m",
            "proxy.cli.main",
            "serve",
            "--config",
            str(config),
        ]
        self.proc = subprocess.Popen(
            [*command, "--host", HOST, "--port", str(self.port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._healthy, "curator serve to answer /healthz", START_S)

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"curator serve exited early: {self.output()}")
        try:
            return httpx.get(self.origin + "/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def refuses_connections(self) -> bool:
        try:
            socket.create_connection((HOST, self.port), timeout=1).close()
        except ConnectionRefusedError:
            return True
        return False

    def output(self) -> str:
        if self.proc.stdout is None:
            return ""
        return self.proc.stdout.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def serve() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for served in started:
        served.stop()


def test_sigterm_lets_a_held_stream_finish(
    tmp_path: Path, fake: FakeOpenAI, serve: list[Served]
) -> None:
    served = Served(_config(tmp_path, fake, grace_s=20))
    serve.append(served)
    release = threading.Event()
    fake.queue(Behavior(reply="finished after the signal", release=release))
    with (
        httpx.Client(base_url=served.origin, timeout=30) as http,
        http.stream("POST", CHAT, content=chat_body(stream=True)) as response,
    ):
        chunks = response.iter_raw()
        first = next(chunks)
        served.proc.send_signal(signal.SIGTERM)
        wait_for(served.refuses_connections, "the listener to close")
        assert served.proc.poll() is None  # still serving the held stream
        release.set()
        body = first + b"".join(chunks)
    assert body == fake.sent[0]
    assert body.endswith(b"data: [DONE]\n\n")
    assert served.proc.wait(20) == 0
    request_id = response.headers["x-curator-request-id"]
    records = [orjson.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    assert request_id in {r.get("id") for r in records}  # flushed before exiting
    log = served.output()
    assert "Application shutdown complete" in log
    assert "sk-upstream-sigterm" not in log


def test_a_stream_outliving_the_grace_is_cut(
    tmp_path: Path, fake: FakeOpenAI, serve: list[Served]
) -> None:
    served = Served(_config(tmp_path, fake, grace_s=1))
    serve.append(served)
    never = threading.Event()
    fake.queue(Behavior(release=never))
    with httpx.Client(base_url=served.origin, timeout=30) as http:
        with http.stream("POST", CHAT, content=chat_body(stream=True)) as response:
            chunks = response.iter_raw()
            next(chunks)
            served.proc.send_signal(signal.SIGTERM)
            with pytest.raises(httpx.RemoteProtocolError):
                b"".join(chunks)  # never a [DONE]: the stream ends as broken
        assert served.proc.wait(20) == 0
    assert fake.disconnected.wait(WAIT_S)
    assert not never.is_set()
