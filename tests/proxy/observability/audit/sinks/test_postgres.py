"""The PostgreSQL sink against a real server: content addressing, idempotent retries,
concurrent writers, kill -9, a restart mid-run, retention, migrations, read-only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import orjson
import psycopg
import pytest

from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.readers.postgres import PostgresReader
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks import postgres_schema as schema
from proxy.observability.audit.sinks.base import StoreUnavailable, split_digests
from proxy.observability.audit.sinks.migrations import SchemaTooNew
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from proxy.observability.audit.writer import AuditWriter
from tests.factories import audited
from tests.postgres import PgServer
from tests.proxy.observability.audit.sinks.test_sqlite import T0, growing_conversation, record

WAIT_S = 60.0


@pytest.fixture(params=[False, True], ids=["by_value", "by_reference"])
def builder(request: pytest.FixtureRequest) -> RecordBuilder:
    """Both builders: the store's own (`by_reference`) and one that keeps every body."""
    return RecordBuilder(Redactor.build(), by_reference=request.param)


def counts(dsn: str) -> tuple[int, int]:
    """(records, messages)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM audit_records), (SELECT count(*) FROM audit_messages)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def dangling(dsn: str) -> int:
    """Digests records reference that no message row holds."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT original, curated FROM audit_records").fetchall()
        held = {row[0] for row in conn.execute("SELECT hash FROM audit_messages")}
    return sum(1 for o, c in rows for d in split_digests(o) + split_digests(c) if d not in held)


def ids(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM audit_records ORDER BY time")]


def test_identical_messages_are_stored_once_and_read_back(
    fresh_dsn: str, builder: RecordBuilder
) -> None:
    system = {"role": "system", "content": "be brief"}
    sink = PostgresSink(fresh_dsn)
    sink.write_many([record(builder, [system, {"role": "user", "content": "a"}], rid="1", at=T0)])
    curated = [{"role": "user", "content": "b"}]
    second = [system, {"role": "user", "content": "b"}]
    sink.write_many([record(builder, second, rid="2", at=T0 + 1, curated=curated)])
    sink.close()
    assert counts(fresh_dsn) == (2, 3)
    assert dangling(fresh_dsn) == 0
    reader = PostgresReader(fresh_dsn)
    try:
        full = reader.get("2")
        assert full is not None
        assert full["original"] == second
        assert full["curated"] == curated
        assert [r["id"] for r in reader.summaries(limit=5)] == ["2", "1"]
        assert [r["id"] for r in reader.between(T0 + 0.5)] == ["2"]
    finally:
        reader.close()


def test_a_retried_batch_stores_nothing_twice(fresh_dsn: str, builder: RecordBuilder) -> None:
    """A COMMIT that landed before the connection dropped: the retry inserts nothing."""
    batch = [
        record(builder, [{"role": "user", "content": f"m{i}"}], rid=f"r{i}", at=T0 + i)
        for i in range(5)
    ]
    sink = PostgresSink(fresh_dsn)
    sink.write_many(batch)
    sink.write_many(batch)
    sink.close()
    assert counts(fresh_dsn) == (5, 5)


def test_growing_conversation_stores_under_15_percent_of_bytes_sent(
    fresh_dsn: str, builder: RecordBuilder
) -> None:
    """Measured as what the conversation adds to the store: an empty one already takes
    ~150 KB (a 16 KB minimum per index, free-space maps), paid once per database."""
    requests = growing_conversation(30)
    sent = 0
    sink = PostgresSink(fresh_dsn)
    sink.prune()  # creates the schema
    empty = store_size(fresh_dsn)
    for turn, messages in enumerate(requests):
        sent += len(orjson.dumps({"model": "gpt-4o", "messages": messages}))
        sink.write_many([record(builder, messages, rid=f"turn-{turn}", at=T0 + turn)])
    sink.close()
    stored = store_size(fresh_dsn) - empty
    assert stored <= 0.15 * sent, (stored, sent)


def store_size(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT pg_total_relation_size('audit_records') + "
            "pg_total_relation_size('audit_messages')"
        ).fetchone()
    assert row is not None
    return int(row[0])


WRITER_SCRIPT = """
import sys
from proxy.observability.audit.entry import RecordBuilder
from tests.factories import audited
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.postgres_writer import PostgresSink

dsn, name, count, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
builder = RecordBuilder(Redactor.build(), by_reference=True)
sink = PostgresSink(dsn)
system = {"role": "system", "content": "shared system prompt " * 50}
i = 0
while count < 0 or i < count:
    records = []
    for j in range(batch):
        n = i + j
        messages = [system, {"role": "user", "content": f"{name} message {n} " + "x" * 500}]
        records.append(builder.build(audited(id=f"{name}-{n}", time=1.0 + n, original=messages)))
    sink.write_many(records)
    i += batch
    print(i, flush=True)
sink.close()
"""


def spawn(dsn: str, name: str, count: int, batch: int = 10) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER_SCRIPT, dsn, name, str(count), str(batch)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_two_processes_write_concurrently_nothing_lost_or_duplicated(fresh_dsn: str) -> None:
    procs = [spawn(fresh_dsn, f"w{k}", 200) for k in range(2)]
    for proc in procs:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    assert counts(fresh_dsn) == (400, 401)  # the shared system prompt once
    assert len(set(ids(fresh_dsn))) == 400
    assert dangling(fresh_dsn) == 0


def test_kill_9_mid_batch_keeps_every_acknowledged_batch_and_consistent_refs(
    fresh_dsn: str, builder: RecordBuilder
) -> None:
    proc = spawn(fresh_dsn, "k", -1, batch=25)
    assert proc.stdout is not None
    acknowledged = 0
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 100:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    stored = set(ids(fresh_dsn))
    assert {f"k-{i}" for i in range(acknowledged)} <= stored
    assert len(stored) % 25 == 0  # a batch is one transaction: all of it or none
    assert dangling(fresh_dsn) == 0
    sink = PostgresSink(fresh_dsn)  # and the store stays writable
    sink.write_many([record(builder, [{"role": "user", "content": "after"}], rid="a", at=T0)])
    sink.close()


def wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_database_restart_mid_run_every_record_written_once(
    pg_server: PgServer, fresh_dsn: str, builder: RecordBuilder
) -> None:
    writer = AuditWriter(PostgresSink(fresh_dsn), builder, max_queue=1000)
    for i in range(50):
        writer.submit(audited(id=f"before-{i}", time=T0 + i, original=[{"role": "user"}]))
    wait_until(lambda: writer.stats().written == 50, "the first records")
    pg_server.stop("immediate")
    try:
        for i in range(50):
            writer.submit(audited(id=f"during-{i}", time=T0 + 50 + i))
        wait_until(lambda: writer.health().state == "degraded", "the outage to show")
        assert writer.stats().failed == 0
    finally:
        pg_server.start()
    wait_until(lambda: writer.stats().written == 100, "the held records after the restart")
    assert writer.health().state == "ok"
    assert writer.close(WAIT_S)
    assert writer.stats().dropped == 0
    assert writer.stats().failed == 0
    stored = ids(fresh_dsn)
    assert len(stored) == len(set(stored)) == 100


def test_down_at_start_queues_then_drops_and_counts(builder: RecordBuilder) -> None:
    dsn = "postgresql://curator:secret@127.0.0.1:9/none"  # nothing listens on port 9
    writer = AuditWriter(PostgresSink(dsn, connect_timeout_s=1), builder, max_queue=5)
    wait_until(lambda: writer.health().state == "degraded", "the outage to show")
    for i in range(40):
        writer.submit(audited(id=f"r{i}", time=T0 + i))
    assert writer.stats().dropped > 0  # beyond the queue (and the one held batch)
    assert writer.close(WAIT_S)
    stats = writer.stats()
    assert stats.written == 0
    assert stats.dropped + stats.failed == 40


def test_retention_prunes_old_records_then_orphaned_messages(
    fresh_dsn: str, builder: RecordBuilder
) -> None:
    shared = {"role": "system", "content": "kept: a newer record still uses it"}
    sink = PostgresSink(fresh_dsn, max_age_days=1)
    old = [
        record(builder, [shared, {"role": "user", "content": f"old {i} " * 400}], rid=f"{i}", at=i)
        for i in range(300)
    ]
    sink.write_many(old)
    now = 3 * 86400.0
    sink.write_many([record(builder, [shared], rid="new", at=now - 60)])

    def live_bytes() -> int:
        with psycopg.connect(fresh_dsn) as conn:
            row = conn.execute(
                "SELECT (SELECT coalesce(sum(octet_length(body)), 0) FROM audit_messages) + "
                "(SELECT coalesce(sum(octet_length(fields) + octet_length(original)), 0) "
                "FROM audit_records)"
            ).fetchone()
        assert row is not None
        return int(row[0])

    before = live_bytes()
    assert sink.prune(now=now) == 300
    sink.close()
    assert ids(fresh_dsn) == ["new"]
    assert counts(fresh_dsn) == (1, 1)
    assert dangling(fresh_dsn) == 0
    assert live_bytes() < before / 50


def test_replicas_starting_together_migrate_once(fresh_dsn: str) -> None:
    applied: list[list[int]] = []

    def start() -> None:
        with schema.connect(fresh_dsn) as conn:
            applied.append(schema.migrate(conn, where="test"))

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert sorted(applied) == [[]] * 5 + [[1, 2]]
    with psycopg.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT version FROM audit_schema").fetchall() == [(1,), (2,)]
        conn.execute("INSERT INTO audit_schema VALUES (99)")
    with schema.connect(fresh_dsn) as conn, pytest.raises(SchemaTooNew, match="newer"):
        schema.migrate(conn, where="test")


def test_a_read_only_database_is_unavailable_not_a_bad_batch(
    fresh_dsn: str, builder: RecordBuilder
) -> None:
    first = PostgresSink(fresh_dsn)
    first.prune()  # creates the schema
    first.close()
    name = fresh_dsn.rsplit("/", 1)[1]
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on".encode())
    sink = PostgresSink(fresh_dsn)
    with pytest.raises(StoreUnavailable, match="read-only"):
        sink.write_many([record(builder, [{"role": "user", "content": "x"}], rid="1", at=T0)])
    sink.close()


def test_errors_never_show_the_password() -> None:
    sink = PostgresSink("postgresql://curator:hunter2@127.0.0.1:9/db", connect_timeout_s=1)
    with pytest.raises(StoreUnavailable) as caught:
        sink.prune()
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in schema.scrub("host=x password=hunter2 user=y")


def test_tools_are_stored_once_and_read_back(fresh_dsn: str, builder: RecordBuilder) -> None:
    tools = [
        {"type": "function", "function": {"name": f"tool_{i}", "description": "x " * 50}}
        for i in range(40)
    ]
    sink = PostgresSink(fresh_dsn)
    for i in range(30):
        turn = [{"role": "user", "content": f"turn {i}"}]
        sink.write_many([record(builder, turn, rid=f"t{i}", at=T0 + i, body={"tools": tools})])
    sink.close()
    assert counts(fresh_dsn) == (30, 31)  # 30 distinct user turns and one tools blob
    with psycopg.connect(fresh_dsn) as conn:
        row = conn.execute("SELECT max(octet_length(fields)) FROM audit_records").fetchone()
    assert row is not None
    assert row[0] < len(orjson.dumps(tools)) / 4
    reader = PostgresReader(fresh_dsn)
    try:
        full = reader.get("t3")
        assert full is not None
        assert full["tools"] == tools
        assert "tools_ref" not in full
    finally:
        reader.close()
