from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks import sqlite as sqlite_sink
from proxy.observability.audit.sinks import sqlite_rows
from proxy.observability.audit.sinks.report_columns import REPORT_COLUMNS
from proxy.observability.audit.sinks.sqlite import (
    SCHEMA_VERSION,
    SqliteSink,
    connect_writer,
    split_digests,
    used_bytes,
)
from tests.factories import audited

T0 = 1_767_225_600.0
WORDS = (
    "the", "function", "returns", "a", "list", "of", "files", "in", "the", "repository", "and",
    "their", "sizes", "while", "the", "test", "suite", "checks", "each", "module", "for",
    "errors", "before", "the", "build", "step", "runs", "on", "every", "change",
)  # fmt: skip


def prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def record(
    builder: RecordBuilder, messages: list[dict[str, Any]], *, rid: str, at: float, **kw: Any
) -> AuditRecord:
    return builder.build(audited(id=rid, time=at, route="r", original=messages, **kw))


@pytest.fixture(params=[False, True], ids=["by_value", "by_reference"])
def builder(request: pytest.FixtureRequest) -> RecordBuilder:
    """Both builders: the store's own (`by_reference`, which leaves the bodies of messages
    its cache knew out of a record) and the one JSONL uses, which keeps every body."""
    return RecordBuilder(Redactor.build(), by_reference=request.param)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "audit.db")


def counts(path: str) -> tuple[int, int, int]:
    """(records, messages, sum of refs)."""
    with closing(sqlite3.connect(path)) as conn:
        records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        refs = conn.execute("SELECT total(refs) FROM message_refs").fetchone()[0]
    return records, messages, int(refs)


def referenced(path: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT original, curated FROM records").fetchall()
    return sum(len(split_digests(o)) + len(split_digests(c)) for o, c in rows)


def test_store_is_wal_private_and_versioned(db: str, builder: RecordBuilder) -> None:
    sink = SqliteSink(db)
    sink.write(record(builder, [{"role": "user", "content": "hi"}], rid="a", at=T0))
    sink.close()
    assert os.stat(db).st_mode & 0o777 == 0o600
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_newer_schema_is_refused(db: str) -> None:
    connect_writer(db).close()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(sqlite3.DatabaseError, match="newer"):
        connect_writer(db)


def test_identical_messages_are_stored_once(db: str, builder: RecordBuilder) -> None:
    system = {"role": "system", "content": "be brief"}
    sink = SqliteSink(db)
    sink.write(record(builder, [system, {"role": "user", "content": "a"}], rid="1", at=T0))
    sink.write(record(builder, [system, {"role": "user", "content": "b"}], rid="2", at=T0 + 1))
    curated = [{"role": "user", "content": "b"}]
    sink.write(
        record(
            builder,
            [system, {"role": "user", "content": "b"}],
            rid="3",
            at=T0 + 2,
            curated=curated,
        )
    )
    sink.close()
    assert counts(db) == (3, 3, 7)
    assert referenced(db) == 7


def test_a_resent_message_body_is_not_written_again(db: str, builder: RecordBuilder) -> None:
    system = {"role": "system", "content": "be brief " * 200}
    sink = SqliteSink(db)
    statements: list[str] = []
    sink._connection().set_trace_callback(statements.append)
    # Two records of one batch share a new message: its body is stored once.
    sink.write_many(
        [
            record(builder, [system, {"role": "user", "content": "a"}], rid="1", at=T0),
            record(builder, [system, {"role": "user", "content": "b"}], rid="2", at=T0 + 1),
        ]
    )
    stored = [s for s in statements if s.startswith("INSERT INTO messages")]
    assert sum(s.count(", 0, ") for s in stored) == 3  # system, "a", "b": one row each
    assert sum(s.count("be brief") for s in statements) == 0  # bodies are bound, not inlined
    statements.clear()
    sink.write(record(builder, [system, {"role": "user", "content": "a"}], rid="3", at=T0 + 2))
    # Every message already stored: only counted, no body sent again.
    assert not any("INSERT INTO messages" in s for s in statements)
    assert any("INSERT INTO message_refs" in s for s in statements)
    sink.close()
    assert counts(db) == (3, 3, 6)
    reader = SqliteReader(db)
    for rid, last in (("1", "a"), ("2", "b"), ("3", "a")):
        got = reader.get(rid)
        assert got is not None
        assert got["original"] == [system, {"role": "user", "content": last}]
    reader.close()


def test_batches_of_any_size_compile_a_few_statement_shapes(
    db: str, builder: RecordBuilder
) -> None:
    # SQLite keeps each distinct statement compiled (Python's cache: up to 128 per
    # connection); a multi-row INSERT of 256 rows is ~200 KB of it. One shape per batch
    # size held ~23 MB after a burst of varied batches: rows go in power-of-two chunks.
    sink = SqliteSink(db)
    statements: list[str] = []
    conn = sink._connection()

    class Recording:
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            statements.append(sql)  # as passed: with its placeholders, one set per row
            return conn.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(conn, name)

    sink._conn = Recording()  # type: ignore[assignment]
    written = 0
    for size in range(1, 41):
        messages = [{"role": "user", "content": f"m{written + k}"} for k in range(size)]
        batch = [
            record(builder, [m], rid=str(written + k), at=T0 + written + k)
            for k, m in enumerate(messages)
        ]
        sink.write_many(batch)
        written += size
    conn.close()
    shapes = {s.count("?") for s in statements if s.startswith("INSERT INTO records")}
    columns = 13 + len(REPORT_COLUMNS)
    assert shapes == {columns * 2**bit for bit in range(6)}  # 1, 2, 4, 8, 16 and 32 rows
    assert counts(db) == (written, written, written)


@pytest.mark.parametrize("total", [0, 1, 7, 255, 256, 257, 300, 1000])
def test_chunks_are_powers_of_two_summing_to_the_rows(total: int) -> None:
    sizes = sqlite_rows.chunk_sizes(total)
    assert sum(sizes) == total
    assert sizes == sorted(sizes, reverse=True)
    assert all(s & (s - 1) == 0 and 0 < s <= sqlite_rows.ROWS_PER_STATEMENT for s in sizes)
    assert len(sizes) <= total // sqlite_rows.ROWS_PER_STATEMENT + 8


def test_before_sqlite_3_35_every_body_is_offered_again(
    db: str, builder: RecordBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without RETURNING the upsert cannot say which messages are new: INSERT OR IGNORE all.
    monkeypatch.setattr(sqlite_sink, "_RETURNING", False)
    system = {"role": "system", "content": "be brief"}
    sink = SqliteSink(db)
    statements: list[str] = []
    sink._connection().set_trace_callback(statements.append)
    sink.write(record(builder, [system, {"role": "user", "content": "a"}], rid="1", at=T0))
    sink.write(record(builder, [system, {"role": "user", "content": "b"}], rid="2", at=T0 + 1))
    sink.close()
    assert sum("INSERT INTO messages" in s for s in statements) == 2
    assert counts(db) == (2, 3, 4)
    reader = SqliteReader(db)
    second = reader.get("2")
    assert second is not None
    assert second["original"] == [system, {"role": "user", "content": "b"}]
    reader.close()


def test_a_message_pruned_and_sent_again_is_stored_again(db: str, builder: RecordBuilder) -> None:
    gone = {"role": "user", "content": "asked once, then again a day later"}
    sink = SqliteSink(db, max_age_days=1)
    day = 86400.0
    sink.write(record(builder, [gone], rid="old", at=T0))
    assert sink.prune(now=T0 + day + 10) == 1
    assert counts(db) == (0, 0, 0)  # the body went with its last reference
    sink.write(record(builder, [gone], rid="new", at=T0 + day + 20))
    sink.close()
    assert counts(db) == (1, 1, 1)
    reader = SqliteReader(db)
    again = reader.get("new")
    assert again is not None
    assert again["original"] == [gone]
    reader.close()


def growing_conversation(turns: int) -> list[list[dict[str, Any]]]:
    """The request bodies' message lists of an agent that resends its history every turn."""
    rng = random.Random(7)
    history: list[dict[str, Any]] = [{"role": "system", "content": prose(rng, 1500)}]
    requests = []
    for turn in range(turns):
        history.append({"role": "user", "content": prose(rng, rng.randint(200, 800))})
        function = {"name": "run", "arguments": json.dumps({"cmd": prose(rng, 120)})}
        call = {"id": f"call_{turn}", "type": "function", "function": function}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append(
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": prose(rng, 3000)}
        )
        requests.append(list(history))
        history.append({"role": "assistant", "content": prose(rng, rng.randint(300, 1200))})
    return requests


def test_growing_conversation_costs_linear_storage(db: str, builder: RecordBuilder) -> None:
    requests = growing_conversation(30)
    sent = 0
    sink = SqliteSink(db)
    for turn, messages in enumerate(requests):
        sent += len(orjson.dumps({"model": "gpt-4o", "messages": messages}))
        sink.write(record(builder, messages, rid=f"turn-{turn}", at=T0 + turn))
    sink.close()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = os.path.getsize(db)
    distinct = len({orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for r in requests for m in r})
    assert counts(db)[:2] == (30, distinct)
    assert stored < sent / 3, (stored, sent)


def test_reader_lists_shows_and_exports(db: str, builder: RecordBuilder) -> None:
    sink = SqliteSink(db)
    for i, route in enumerate(["a", "b", "a"]):
        messages = [{"role": "user", "content": f"q{i}"}]
        rec = builder.build(audited(id=f"req-{i}", time=T0 + i, route=route, original=messages))
        sink.write(rec)
    sink.close()
    reader = SqliteReader(db)
    assert [s["id"] for s in reader.summaries(limit=10)] == ["req-2", "req-1", "req-0"]
    assert [s["id"] for s in reader.summaries(limit=10, route="a")] == ["req-2", "req-0"]
    assert reader.summaries(limit=1)[0]["messages"] == 1
    full = reader.get("req-1")
    assert full is not None
    assert full["original"] == [{"role": "user", "content": "q1"}] == full["curated"]
    assert reader.get("nope") is None
    with pytest.raises(LookupError, match="several"):
        reader.get("req-")
    assert [r["id"] for r in reader.between(T0 + 1)] == ["req-1", "req-2"]
    assert [r["id"] for r in reader.between(T0, T0 + 1)] == ["req-0"]
    reader.close()


def test_prefix_lookup_treats_like_wildcards_literally(db: str, builder: RecordBuilder) -> None:
    sink = SqliteSink(db)
    for rid in ("a_1", "ab1"):
        sink.write(builder.build(audited(id=rid, time=T0, original=[])))
    sink.close()
    reader = SqliteReader(db)
    found = reader.get("a_")
    assert found is not None
    assert found["id"] == "a_1"
    reader.close()


def test_retention_by_age_drops_old_records_and_orphaned_messages(
    db: str, builder: RecordBuilder
) -> None:
    shared = {"role": "system", "content": "shared"}
    sink = SqliteSink(db, max_age_days=1)
    day = 86400.0
    sink.write(record(builder, [shared, {"role": "user", "content": "old"}], rid="o", at=T0))
    sink.write(record(builder, [shared, {"role": "user", "content": "new"}], rid="n", at=T0 + day))
    assert sink.prune(now=T0 + day + 10) == 1
    sink.close()
    assert counts(db) == (1, 2, 2)
    reader = SqliteReader(db)
    kept = reader.get("n")
    assert kept is not None
    assert kept["original"] == [shared, {"role": "user", "content": "new"}]
    assert reader.get("o") is None
    reader.close()


def test_retention_by_size_keeps_the_newest(db: str, builder: RecordBuilder) -> None:
    rng = random.Random(3)
    limit = 200_000
    sink = SqliteSink(db, max_bytes=limit)
    for i in range(60):
        big = [{"role": "tool", "tool_call_id": "x", "content": prose(rng, 8000)}]
        sink.write(record(builder, big, rid=f"r{i:02}", at=T0 + i))
    deleted = sink.prune()
    sink.close()
    assert deleted > 0
    with closing(sqlite3.connect(db)) as conn:
        assert used_bytes(conn) <= limit
        ids = [row[0] for row in conn.execute("SELECT id FROM records ORDER BY time")]
    assert ids[-1] == "r59"
    assert ids == [f"r{i:02}" for i in range(60 - len(ids), 60)]
    stored, messages, refs = counts(db)
    assert messages == stored == refs == referenced(db)


def test_prune_without_retention_does_nothing(db: str, builder: RecordBuilder) -> None:
    sink = SqliteSink(db)
    sink.write(record(builder, [{"role": "user", "content": "x"}], rid="x", at=0.0))
    assert sink.prune(now=T0) == 0
    sink.close()
    assert counts(db)[0] == 1


WRITER_SCRIPT = """
import sys
from proxy.observability.audit.entry import RecordBuilder
from tests.factories import audited
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.sqlite import SqliteSink

path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
builder = RecordBuilder(Redactor.build())
sink = SqliteSink(path)
system = {"role": "system", "content": "shared system prompt " * 50}
i = 0
while count < 0 or i < count:
    messages = [system, {"role": "user", "content": f"{name} message {i} " + "x" * 2000}]
    sink.write(builder.build(audited(id=f"{name}-{i}", time=1.0 + i, original=messages)))
    print(i, flush=True)
    i += 1
sink.close()
"""


def spawn(db: str, name: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER_SCRIPT, db, name, str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )


def integrity(db: str) -> str:
    with closing(sqlite3.connect(db)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def test_several_processes_write_one_store(db: str) -> None:
    procs = [spawn(db, f"w{k}", 40) for k in range(3)]
    for proc in procs:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    assert integrity(db) == "ok"
    records, messages, refs = counts(db)
    assert records == 120
    assert messages == 121  # the shared system prompt once, plus one user message each
    assert refs == referenced(db) == 240


def test_kill_9_mid_write_loses_at_most_the_record_in_flight(db: str) -> None:
    proc = spawn(db, "k", -1)
    assert proc.stdout is not None
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 50:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert integrity(db) == "ok"
    reader = SqliteReader(db)
    ids = {r["id"] for r in reader.between(0.0)}
    reader.close()
    # Every record acknowledged before the kill is there; later ones may or may not be.
    assert {f"k-{i}" for i in range(acknowledged + 1)} <= ids
    assert counts(db)[2] == referenced(db)
    # The store stays writable after the crash.
    sink = SqliteSink(db)
    sink.write(RecordBuilder(Redactor.build()).build(audited(id="after", time=T0)))
    sink.close()


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": "Reads a file and returns its numbered lines. " * 3,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for i in range(40)
]


def test_tools_are_stored_once_and_read_back_then_pruned(db: str, builder: RecordBuilder) -> None:
    sink = SqliteSink(db, max_age_days=1)
    body = {"tools": TOOLS}
    for i in range(30):
        turn = [{"role": "user", "content": f"turn {i}"}]
        sink.write(record(builder, turn, rid=f"t{i:02}", at=T0 + i, body=body))
    with closing(sqlite3.connect(db)) as conn:
        sizes = [row[0] for row in conn.execute("SELECT length(fields) FROM records")]
        tool_blobs = conn.execute(
            "SELECT count(*), max(r.refs) FROM messages m JOIN message_refs r USING (hash) "
            "WHERE instr(CAST(m.body AS TEXT), 'tool_39')"
        ).fetchone()
    assert tool_blobs == (1, 30)  # one blob, referenced by every record
    assert max(sizes) < len(orjson.dumps(TOOLS)) / 4  # the records hold a reference only
    reader = SqliteReader(db)
    full = reader.get("t07")
    assert full is not None
    assert full["tools"] == TOOLS
    assert "tools_ref" not in full
    summary = reader.summaries(limit=1)[0]
    assert "tools_ref" not in summary
    reader.close()
    assert sink.prune(now=T0 + 86400 + 60) == 30
    sink.close()
    assert counts(db) == (0, 0, 0)  # the tools went with the last record using them
