"""A real `curator serve` process: memory under oversized request heads, and a port in use.

Memory is the server process's own RSS (from /proc), sampled while four clients each
stream 50 MB of one never-ending header line at it, and again after they are gone.
"""

from __future__ import annotations

import errno
import os
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
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.raw_http import connect, read_response, send_all_tolerant
from tests.hardening.support import WAIT_S, wait_for

START_S = 60.0
"""Bound for the process to start answering (tokenizers load first); not a speed check."""
ATTACKERS = 4
HEAD_BYTES = 50 << 20
RSS_HEADROOM_KB = 40 << 10
"""What the attack may add to the server's RSS at its peak (it sends 200 MB in all)."""
RSS_AFTER_KB = 16 << 10
"""What may remain once the attackers are gone (allocator slack, metrics)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
    return port


def _config(tmp_path: Path, fake: FakeOpenAI) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            upstreams:
              fake: {{base_url: "{fake.origin}/v1"}}
            policies:
              off: preset:passthrough
            routes:
              - {{name: default, upstream: fake, policy: "off"}}
            audit: {{sink: none}}
            """
        )
    )
    return path


def _command(config: Path, port: int) -> list[str]:
    serve = [sys.executable, "-m", "proxy.cli.main", "serve", "--config", str(config)]
    return [*serve, "--host", HOST, "--port", str(port)]


@pytest.fixture
def served(tmp_path: Path, fake: FakeOpenAI) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        _command(_config(tmp_path, fake), port),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def healthy() -> bool:
        assert proc.poll() is None, "curator serve exited early"
        try:
            return httpx.get(f"http://{HOST}:{port}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(healthy, "curator serve to answer /healthz", START_S)
        yield proc, port
    finally:
        proc.kill()
        proc.wait(WAIT_S)


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _attack(port: int, statuses: list[int]) -> None:
    with connect(port) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: ")
        send_all_tolerant(sock, b"a" * HEAD_BYTES)
        response = read_response(sock)
        statuses.append(response.status)
        assert orjson.loads(response.body)["error"]["code"] == "request_header_too_large"


def test_huge_heads_get_431_and_the_server_memory_stays_bounded(
    served: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, port = served
    before = _rss_kb(proc.pid)
    peak = before
    statuses: list[int] = []
    attackers = [
        threading.Thread(target=_attack, args=(port, statuses), daemon=True)
        for _ in range(ATTACKERS)
    ]
    for attacker in attackers:
        attacker.start()
    while any(a.is_alive() for a in attackers):  # bounded by the sockets' WAIT_S timeouts
        peak = max(peak, _rss_kb(proc.pid))
        attackers[0].join(0.005)
    assert statuses == [431] * ATTACKERS
    assert peak - before < RSS_HEADROOM_KB, (before, peak)
    assert httpx.get(f"http://{HOST}:{port}/healthz", timeout=WAIT_S).status_code == 200
    assert _rss_kb(proc.pid) - before < RSS_AFTER_KB


def test_a_port_in_use_fails_with_the_address_and_no_listening_line(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            _command(_config(tmp_path, fake), port),
            capture_output=True,
            timeout=START_S,
            check=False,
        )
    output = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode != 0, output
    assert f"{HOST}:{port}" in output, output
    assert os.strerror(errno.EADDRINUSE) in output, output
    assert "listening on" not in output.lower(), output
