"""Two `curator serve` processes writing one PostgreSQL audit store over real sockets:
every request has exactly one record, and `curator audit list` from a third config that
holds only the DSN sees both. The DSN's password never reaches a log or `curator check`.
With the database down, the proxy serves and /healthz reports the audit degraded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
import psycopg
import pytest

from tests.e2e.test_audit import write_config
from tests.e2e.test_workers import HOST, chat, free_port
from tests.fakes.upstream import FakeOpenAI
from tests.postgres import PgServer

pytestmark = pytest.mark.e2e
STARTUP_S = 60.0
PASSWORD = "hunter2-not-printed"
CURATOR = str(Path(sys.executable).parent / "curator")


class Serve:
    """One `curator serve` process with its own config, port and log."""

    def __init__(self, folder: Path, upstream: str, dsn: str) -> None:
        self.port = free_port()
        server = f"server: {{host: {HOST}, port: {self.port}}}"
        audit = '{sink: postgres, dsn: "${CURATOR_AUDIT_DSN}"}'
        self.config = write_config(folder, upstream, audit=audit, metrics=server)
        self.log = folder / "serve.log"
        env = {**os.environ, "CURATOR_AUDIT_DSN": dsn}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [CURATOR, "serve", "--config", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=folder,
                env=env,
            )

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    def health(self) -> dict[str, object] | None:
        try:
            answer = httpx.get(self.origin + "/healthz", timeout=2)
        except httpx.TransportError:
            return None
        assert answer.status_code == 200
        body: dict[str, object] = answer.json()
        return body

    def wait_until_serving(self) -> None:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline and self.process.poll() is None:
            if self.health() is not None:
                return
            time.sleep(0.1)
        raise AssertionError(f"curator serve never came up:\n{self.log.read_text()}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


@pytest.fixture
def serving() -> Iterator[list[Serve]]:
    started: list[Serve] = []
    try:
        yield started
    finally:
        for serve in started:
            if serve.process.poll() is None:
                serve.process.kill()
                serve.process.wait(timeout=30)


def with_password(dsn: str) -> str:
    return dsn.replace("curator@", f"curator:{PASSWORD}@")  # trust auth ignores it


def test_two_proxies_one_database_every_request_exactly_once(
    tmp_path: Path, fake: FakeOpenAI, fresh_dsn: str, serving: list[Serve]
) -> None:
    dsn = with_password(fresh_dsn)
    serving += [Serve(tmp_path / f"host{k}", fake.origin, dsn) for k in range(2)]
    for serve in serving:
        serve.wait_until_serving()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda n: chat(serving[n % 2].origin, n), range(60)))
    assert all(a.status_code == 200 for a in answers)
    assert [serve.stop() for serve in serving] == [0, 0]

    sent = sorted(a.headers["x-curator-request-id"] for a in answers)
    with psycopg.connect(fresh_dsn) as conn:
        stored = sorted(row[0] for row in conn.execute("SELECT id FROM audit_records"))
    assert stored == sent

    # A third machine's view: a config with nothing but the DSN.
    third = tmp_path / "third" / "config.yaml"
    third.parent.mkdir()
    third.write_text('audit: {dsn: "${CURATOR_AUDIT_DSN}"}\n')
    env = {**os.environ, "CURATOR_AUDIT_DSN": dsn}
    listed = subprocess.run(
        [CURATOR, "audit", "list", "--config", str(third), "--json", "--limit", "1000"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    rows = [orjson.loads(line) for line in listed.stdout.splitlines()]
    assert sorted(r["id"] for r in rows) == sent
    shown = subprocess.run(
        [CURATOR, "audit", "show", sent[0], "--config", str(third), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert orjson.loads(shown.stdout)["original"][0]["role"] == "user"
    checked = subprocess.run(
        [CURATOR, "check", "--config", str(serving[0].config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "audit: postgres postgresql://***@127.0.0.1" in checked.stdout, checked.stdout
    for text in [checked.stdout, checked.stderr, *(s.log.read_text() for s in serving)]:
        assert PASSWORD not in text


def test_database_down_the_proxy_serves_and_healthz_says_degraded(
    tmp_path: Path, fake: FakeOpenAI, pg_server: PgServer, fresh_dsn: str, serving: list[Serve]
) -> None:
    serve = Serve(tmp_path, fake.origin, with_password(fresh_dsn))
    serving.append(serve)
    serve.wait_until_serving()
    assert serve.health() == {"status": "ok"}
    pg_server.stop("immediate")
    try:
        answers = [chat(serve.origin, n) for n in range(5)]
        assert all(a.status_code == 200 for a in answers)
        deadline = time.monotonic() + STARTUP_S
        while (health := serve.health()) == {"status": "ok"}:
            assert time.monotonic() < deadline, "the outage never showed in /healthz"
            time.sleep(0.1)
        assert health is not None
        assert health["status"] == "ok"
        assert health["audit"]["state"] == "degraded"  # type: ignore[index]
    finally:
        pg_server.start()
    deadline = time.monotonic() + STARTUP_S
    while serve.health() != {"status": "ok"}:
        assert time.monotonic() < deadline, "the audit never recovered"
        time.sleep(0.2)
    assert serve.stop() == 0
    ids = {a.headers["x-curator-request-id"] for a in answers}
    with psycopg.connect(fresh_dsn) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM audit_records")}
    assert stored == ids
    log = serve.log.read_text()
    assert log.count("store is unavailable") == 1
    assert PASSWORD not in log
