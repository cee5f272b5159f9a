"""`curator serve --workers 2` as a real process tree: requests spread over both workers,
every worker's scrape adds up all of them, the shared SQLite audit log keeps every record
intact, and SIGTERM stops everything cleanly. Each worker's event loop thread, and it
alone, runs with short scheduler slices."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import httpx
import orjson
import pytest
from prometheus_client.multiprocess import MultiProcessCollector

from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.priority import LOOP_SLICE_NS, thread_slice
from tests.e2e.test_audit import write_config
from tests.e2e.test_metrics import parse, total
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

HOST = "127.0.0.1"
BATCH = 24
STARTUP_S = 90.0
SETTLE_S = 30.0
"""Bound for a worker already serving to finish starting its app; not a speed check."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def worker_pids(folder: Path) -> set[int]:
    """Workers that have created their metric files (they do so before serving)."""
    return {int(p.stem.rsplit("_", 1)[1]) for p in folder.glob("counter_*.db")}


def requests_by_worker(folder: Path) -> dict[int, float]:
    served = {}
    for path in folder.glob("counter_*.db"):
        metrics = MultiProcessCollector.merge([str(path)])  # type: ignore[no-untyped-call]
        count = sum(
            s.value for m in metrics for s in m.samples if s.name == "curator_requests_total"
        )
        served[int(path.stem.rsplit("_", 1)[1])] = count
    return served


class Proxy:
    """The `curator` process tree, its ports and files."""

    def __init__(self, folder: Path, upstream: str) -> None:
        self.folder = folder
        self.port, self.admin = free_port(), free_port()
        self.metrics_dir = folder / "prom"
        metrics = (
            f"metrics: {{port: {self.admin}, host: {HOST}, multiprocess_dir: prom}}\n"
            f"server: {{host: {HOST}, port: {self.port}, workers: 2}}"
        )
        self.config = write_config(folder, upstream, audit="{path: audit.db}", metrics=metrics)
        self.log = folder / "serve.log"
        command = [str(Path(sys.executable).parent / "curator"), "serve", "--config"]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, str(self.config)], stdout=log, stderr=subprocess.STDOUT, cwd=folder
            )

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    def wait_until_serving(self) -> None:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline and self.process.poll() is None:
            if len(worker_pids(self.metrics_dir)) == 2 and self._healthy():
                return
            time.sleep(0.1)
        raise AssertionError(f"workers never came up:\n{self.log.read_text()}")

    def _healthy(self) -> bool:
        try:
            return httpx.get(self.origin + "/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def scrape(self) -> str:
        return httpx.get(f"http://{HOST}:{self.admin}/metrics", timeout=10).text

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


@pytest.fixture
def proxy(tmp_path: Path, fake: FakeOpenAI) -> Iterator[Proxy]:
    running = Proxy(tmp_path, fake.origin)
    try:
        running.wait_until_serving()
        yield running
    finally:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait(timeout=30)


def chat(origin: str, n: int) -> httpx.Response:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"request {n}"}]}
    # A fresh connection each time, so the kernel may hand it to either worker.
    return httpx.post(origin + "/v1/chat/completions", content=orjson.dumps(body), timeout=30)


def test_two_workers_share_the_load_the_metrics_and_the_audit_log(proxy: Proxy) -> None:
    answers: list[httpx.Response] = []
    deadline = time.monotonic() + 30
    with ThreadPoolExecutor(8) as pool:
        # Until both workers have answered some; each publishes its counts to the files
        # twice a second.
        while time.monotonic() < deadline:
            answers += pool.map(lambda n: chat(proxy.origin, n), range(BATCH))
            time.sleep(0.6)
            if len([c for c in requests_by_worker(proxy.metrics_dir).values() if c]) == 2:
                break
    assert all(a.status_code == 200 for a in answers)
    served = requests_by_worker(proxy.metrics_dir)
    assert len([c for c in served.values() if c]) == 2, served
    assert httpx.get(proxy.origin + "/metrics").status_code == 404  # the admin port has it

    expected = len(answers)
    before = sum(int(a.headers["x-curator-tokens-before"]) for a in answers)
    for _ in range(200):  # the last requests are counted just after their responses end
        if total(parse(proxy.scrape()), "curator_requests_total") == expected:
            break
        time.sleep(0.02)
    for _ in range(6):  # scrapes land on either worker: each one adds up all of them
        samples = parse(proxy.scrape())
        assert total(samples, "curator_requests_total", status="200") == expected
        assert total(samples, "curator_tokens_total", stage="before") == before
        assert total(samples, "curator_inflight_requests") == 0

    assert proxy.stop() == 0
    log = proxy.log.read_text()
    assert "Traceback" not in log
    assert "Application startup failed" not in log
    db = proxy.folder / "audit.db"
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    reader = SqliteReader(str(db))
    try:
        ids = {a.headers["x-curator-request-id"] for a in answers}
        assert {r["id"] for r in reader.summaries(limit=10 * expected)} == ids
        record = reader.get(next(iter(ids)))
    finally:
        reader.close()
    assert record is not None
    assert record["response"]["text"] == "Hello from the fake upstream."
    # Each worker dropped its live gauges on the way out; counters stay for the record.
    assert not list(proxy.metrics_dir.glob("gauge_live*"))


@pytest.mark.skipif(thread_slice(0) is None, reason="the kernel has no per-thread slices")
def test_each_workers_event_loop_thread_alone_has_short_slices(proxy: Proxy) -> None:
    assert chat(proxy.origin, 0).status_code == 200
    pids = worker_pids(proxy.metrics_dir)
    # A worker's metric files come before its app has started; the slice comes after.
    # uvicorn runs each worker's loop on its main thread.
    deadline = time.monotonic() + SETTLE_S
    while any(thread_slice(pid) != LOOP_SLICE_NS for pid in pids):
        assert time.monotonic() < deadline, {pid: thread_slice(pid) for pid in pids}
        time.sleep(0.05)
    for pid in pids:
        others = [int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid]
        # The audit writer among them, and whatever the loop thread started since.
        assert len(others) >= 2
        assert all(thread_slice(tid) != LOOP_SLICE_NS for tid in others), others
    assert proxy.stop() == 0
