"""A real `curator serve` process on a loopback port, for the tests that measure the
server's own memory (its RSS, from /proc) or need its production startup."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.fakes.servers import HOST
from tests.hardening.support import WAIT_S, wait_for

START_S = 60.0
"""Bound for the process to start answering (tokenizers load first); not a speed check."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
    return port


def serve_command(config: Path, port: int) -> list[str]:
    serve = [sys.executable, "-m", "proxy.cli.main", "serve", "--config", str(config)]
    return [*serve, "--host", HOST, "--port", str(port)]


@dataclass(frozen=True, slots=True)
class Served:
    """A running `curator serve`."""

    proc: subprocess.Popen[bytes]
    port: int

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    def rss_kb(self) -> int:
        """The process's resident memory now."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def settled_rss_kb(self, within_kb: int = 1024, timeout_s: float = WAIT_S) -> int:
        """The RSS once two samples 0.25 s apart differ by less than `within_kb` (background
        threads done with what they were given)."""
        deadline = time.monotonic() + timeout_s
        last = self.rss_kb()
        while True:
            time.sleep(0.25)
            now = self.rss_kb()
            if abs(now - last) < within_kb or time.monotonic() > deadline:
                return now
            last = now


@contextmanager
def serving(config: Path) -> Iterator[Served]:
    """`curator serve --config config` until the block ends (killed then)."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        serve_command(config, port), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )

    def healthy() -> bool:
        assert proc.poll() is None, "curator serve exited early"
        try:
            return httpx.get(f"http://{HOST}:{port}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(healthy, "curator serve to answer /healthz", START_S)
        yield Served(proc, port)
    finally:
        proc.kill()
        proc.wait(WAIT_S)
