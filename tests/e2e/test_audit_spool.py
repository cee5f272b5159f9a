"""The audit's disk spool on a real PostgreSQL and real `curator serve` processes: the database
stopped under load, the proxy stopped and started again (now with two workers) while it is
still down and more requests answered, then the database back: every answered request's
record is in the store exactly once, and `/healthz` and `/metrics` showed the spool on the
way and say it is empty at the end."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.e2e.test_audit import write_config
from tests.e2e.test_audit_postgres import CURATOR
from tests.e2e.test_workers import HOST, chat, free_port
from tests.fakes.upstream import FakeOpenAI
from tests.postgres import PgServer

pytestmark = pytest.mark.e2e
STARTUP_S = 60.0
OUTAGE_S = 8.0
"""How long the database stays down under load in the first run (the issue's check uses
30 s; the spool's behaviour does not change with the length, only the count)."""


class Proxy:
    """`curator serve` on a config whose audit goes to `dsn` (spool: its default, beside the
    config), with an admin port for `/metrics`."""

    def __init__(self, folder: Path, upstream: str, dsn: str, *, workers: int) -> None:
        self.port, self.admin = free_port(), free_port()
        metrics = (
            f"server: {{host: {HOST}, port: {self.port}}}\n"
            f"metrics: {{port: {self.admin}, host: {HOST}}}"
        )
        config = write_config(folder, upstream, audit=f'{{dsn: "{dsn}"}}', metrics=metrics)
        self.log = folder / f"serve-{workers}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [CURATOR, "serve", "--config", str(config), "--workers", str(workers)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=folder,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + STARTUP_S
        while self.health() is None:
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    def health(self) -> dict[str, object] | None:
        try:
            return dict(httpx.get(self.origin + "/healthz", timeout=5).json())
        except httpx.TransportError:
            return None

    def spooled(self) -> int:
        """`curator_audit_spool_records` as a scrape of the admin port shows it."""
        text = httpx.get(f"http://{HOST}:{self.admin}/metrics", timeout=10).text
        line = next(x for x in text.splitlines() if x.startswith("curator_audit_spool_records "))
        return int(float(line.split()[1]))

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


class Load:
    """Clients sending chat completions until stopped; keeps the ids of those answered."""

    def __init__(self, origin: str, clients: int = 4) -> None:
        self.answered: list[str] = []
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(clients)
        self._futures = [self._pool.submit(self._client, origin, k) for k in range(clients)]

    def _client(self, origin: str, k: int) -> None:
        n = 0
        while not self._stop.is_set():
            answer = chat(origin, k * 1_000_000 + n)
            n += 1
            if answer.status_code == 200:
                self.answered.append(answer.headers["x-curator-request-id"])

    def stop(self) -> list[str]:
        self._stop.set()
        for future in self._futures:
            future.result(timeout=60)
        self._pool.shutdown()
        return self.answered


@pytest.fixture
def procs() -> Iterator[list[Proxy]]:
    started: list[Proxy] = []
    try:
        yield started
    finally:
        for proxy in started:
            if proxy.process.poll() is None:
                proxy.process.kill()
                proxy.process.wait(timeout=30)


def wait_for(condition: object, what: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{log.read_text()}"
        time.sleep(0.2)


def test_an_outage_across_a_restart_loses_nothing_and_writes_each_record_once(
    tmp_path: Path, fake: FakeOpenAI, pg_server: PgServer, fresh_dsn: str, procs: list[Proxy]
) -> None:
    first = Proxy(tmp_path, fake.origin, fresh_dsn, workers=1)
    procs.append(first)
    load = Load(first.origin)
    time.sleep(1.0)
    pg_server.stop("immediate")
    try:
        time.sleep(OUTAGE_S)
        answered = load.stop()
        wait_for(lambda: first.spooled() > 0, "the spool gauge", first.log)
        health = first.health()
        assert health is not None
        assert health["audit"]["state"] == "degraded"  # type: ignore[index]
        assert health["audit"]["spool"]["records"] > 0  # type: ignore[index]
        assert first.stop() == 0  # stopped while the database is down
        assert (tmp_path / "curator-audit-spool.db").exists()

        second = Proxy(tmp_path, fake.origin, fresh_dsn, workers=2)  # still down
        procs.append(second)
        with ThreadPoolExecutor(4) as pool:
            later = list(pool.map(lambda n: chat(second.origin, 9_000_000 + n), range(20)))
        assert all(a.status_code == 200 for a in later)
        answered += [a.headers["x-curator-request-id"] for a in later]
    finally:
        pg_server.start()
    ok = {"status": "ok"}
    # Every worker says so (each /healthz goes to either, on a connection of its own).
    wait_for(lambda: all(second.health() == ok for _ in range(8)), "the spool to drain", second.log)
    # Each worker reads the spool's figures once a second: both say so soon.
    wait_for(lambda: second.spooled() == 0, "the spool gauge at 0", second.log)
    assert second.stop() == 0

    with psycopg.connect(fresh_dsn) as conn:
        stored = conn.execute("SELECT id, count(*) FROM audit_records GROUP BY id").fetchall()
    counts = dict(stored)
    assert len(answered) > 40  # a real load, not a handful
    assert sorted(counts) == sorted(answered)  # every answered request, and only those
    assert set(counts.values()) == {1}  # each once
    logs = first.log.read_text() + second.log.read_text()
    assert "records are dropped" not in logs
