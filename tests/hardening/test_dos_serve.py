"""A real `curator serve` process: memory under oversized request heads, and a port in use.

Memory is the server process's own RSS (from /proc), sampled while four clients each
stream 50 MB of one never-ending header line at it, and again after they are gone.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
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
from tests.hardening.served import START_S, Served, serve_command, serving
from tests.hardening.support import WAIT_S

ATTACKERS = 4
HEAD_BYTES = 50 << 20
RSS_HEADROOM_KB = 40 << 10
"""What the attack may add to the server's RSS at its peak (it sends 200 MB in all)."""
RSS_AFTER_KB = 16 << 10
"""What may remain once the attackers are gone (allocator slack, metrics)."""


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


@pytest.fixture
def served(tmp_path: Path, fake: FakeOpenAI) -> Iterator[Served]:
    with serving(_config(tmp_path, fake)) as running:
        yield running


def _attack(port: int, statuses: list[int]) -> None:
    with connect(port) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: ")
        send_all_tolerant(sock, b"a" * HEAD_BYTES)
        response = read_response(sock)
        statuses.append(response.status)
        assert orjson.loads(response.body)["error"]["code"] == "request_header_too_large"


def test_huge_heads_get_431_and_the_server_memory_stays_bounded(served: Served) -> None:
    port = served.port
    before = served.rss_kb()
    peak = before
    statuses: list[int] = []
    attackers = [
        threading.Thread(target=_attack, args=(port, statuses), daemon=True)
        for _ in range(ATTACKERS)
    ]
    for attacker in attackers:
        attacker.start()
    while any(a.is_alive() for a in attackers):  # bounded by the sockets' WAIT_S timeouts
        peak = max(peak, served.rss_kb())
        attackers[0].join(0.005)
    assert statuses == [431] * ATTACKERS
    assert peak - before < RSS_HEADROOM_KB, (before, peak)
    assert httpx.get(f"http://{HOST}:{port}/healthz", timeout=WAIT_S).status_code == 200
    assert served.rss_kb() - before < RSS_AFTER_KB


def test_a_port_in_use_fails_with_the_address_and_no_listening_line(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            serve_command(_config(tmp_path, fake), port),
            capture_output=True,
            timeout=START_S,
            check=False,
        )
    output = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode != 0, output
    assert f"{HOST}:{port}" in output, output
    assert os.strerror(errno.EADDRINUSE) in output, output
    assert "listening on" not in output.lower(), output
