"""A frozen PostgreSQL (every process of the cluster SIGSTOP'd: its kernel still accepts and
acknowledges, nothing answers) against a client-side deadline, over real sockets: a batch
fails as unavailable within `audit.timeout_s`, and a proxy auditing there says degraded on
/healthz while it serves, then ok once the database thaws."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from proxy.config.audit import AuditConfig
from proxy.observability.audit.sinks.base import StoreUnavailable
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.support import CHAT, chat_body, hardening_config, running_proxy, wait_for
from tests.postgres import PgServer
from tests.proxy.observability.audit.sinks.test_postgres_writer import msg, rec

TIMEOUT_S = 1.0


def _cluster(server: PgServer) -> list[int]:
    """The postmaster and its children."""
    head = int((server.data / "postmaster.pid").read_text().split()[0])
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == head:
                children.append(int(entry.name))
    return [head, *children]


@contextmanager
def frozen(server: PgServer) -> Iterator[None]:
    pids = _cluster(server)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def test_a_batch_fails_as_unavailable_within_the_deadline(
    pg_server: PgServer, fresh_dsn: str
) -> None:
    sink = PostgresSink(fresh_dsn, timeout_s=TIMEOUT_S)
    try:
        sink.write_many([rec("r1", 1.0, [msg("a")])])
        with frozen(pg_server):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match=r"no answer within 1 s"):
                sink.write_many([rec("r2", 2.0, [msg("b")])])
            assert time.monotonic() - started < 10 * TIMEOUT_S  # was: blocked until thawed
        sink.write_many([rec("r2", 2.0, [msg("b")])])  # reconnected once it thawed
    finally:
        sink.close()


def test_healthz_says_degraded_while_the_database_is_frozen(
    pg_server: PgServer, fresh_dsn: str, fake: FakeOpenAI
) -> None:
    audit = AuditConfig(sink="postgres", path=fresh_dsn, options={"timeout_s": TIMEOUT_S})
    config = replace(hardening_config(fake.origin), audit=audit)
    with running_proxy(config) as proxy, httpx.Client(base_url=proxy.origin, timeout=30) as http:

        def audit_state() -> str:
            return str(http.get("/healthz").json().get("audit", {}).get("state", "ok"))

        assert http.post(CHAT, content=chat_body()).status_code == 200
        with frozen(pg_server):
            for _ in range(3):
                assert http.post(CHAT, content=chat_body()).status_code == 200
            wait_for(lambda: audit_state() == "degraded", "/healthz to say degraded")
        wait_for(lambda: audit_state() == "ok", "/healthz to say ok again", timeout_s=40)
