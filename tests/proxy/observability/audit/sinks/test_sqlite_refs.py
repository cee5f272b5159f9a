"""The SQLite store's reference counts with bases (`sinks.sqlite_refs`): a turn counts only
what its conversation's previous record did not, and a body is kept exactly while some
record references it, whatever order records are written, pruned and shared in."""

from __future__ import annotations

import sqlite3
import tempfile
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks import sqlite as sqlite_sink
from proxy.observability.audit.sinks import sqlite_refs
from proxy.observability.audit.sinks.sqlite import SqliteSink, transaction
from proxy.observability.audit.sinks.sqlite_refs import stored_references
from tests.factories import audited

T0 = 1_767_225_600.0
TABLES = ("records", "messages", "message_refs")
TOOLS = {"tools": [{"type": "function", "function": {"name": "read", "parameters": {}}}]}


@pytest.fixture(autouse=True)
def chain_small_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records of a few messages name bases here, so the cases stay small."""
    monkeypatch.setattr(sqlite_refs, "CHAIN_MIN_REFS", 2)


def rows_left(conn: sqlite3.Connection) -> list[int]:
    """How many rows the store's records, messages and counts have."""
    return [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES]


def owned(conn: sqlite3.Connection) -> Counter[bytes]:
    """What the counts must be: each record's references, less its base's if it names one."""
    rows = {
        seq: (base, stored_references(original, curated, fields))
        for seq, base, original, curated, fields in conn.execute(
            "SELECT seq, base, original, curated, fields FROM records"
        )
    }
    total: Counter[bytes] = Counter()
    for base, refs in rows.values():
        total.update(refs if base is None else refs - rows[base][1])
    return total


def assert_consistent(path: str) -> None:
    """The counts are what the records own, and the bodies stored are exactly those some
    record references."""
    with closing(sqlite3.connect(path)) as conn:
        counts = dict(conn.execute("SELECT hash, refs FROM message_refs").fetchall())
        stored = {row[0] for row in conn.execute("SELECT hash FROM messages")}
        referenced: set[bytes] = set()
        for row in conn.execute("SELECT original, curated, fields FROM records"):
            referenced.update(stored_references(*row))
        expected = owned(conn)
    assert counts == dict(expected)
    assert stored == referenced == set(counts)


def turn(
    builder: RecordBuilder, messages: list[dict[str, Any]], rid: str, at: float, **kw: Any
) -> AuditRecord:
    return builder.build(audited(id=rid, time=at, route="r", original=messages, **kw))


def history(n: int, task: str = "fix the bug") -> list[dict[str, Any]]:
    head = [{"role": "system", "content": "You are a coding agent."}]
    head.append({"role": "user", "content": task})
    return head + [{"role": "user", "content": f"step {i}"} for i in range(n)]


def test_a_resent_history_counts_only_what_the_turn_adds(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    sink = SqliteSink(db)
    statements: list[str] = []
    sink.write(turn(builder, history(100), "t0", T0))
    sink._connection().set_trace_callback(statements.append)
    sink.write(turn(builder, history(101), "t1", T0 + 1))
    sink.close()
    counted = [s for s in statements if s.startswith("INSERT INTO message_refs")]
    assert len(counted) == 1
    assert counted[0].count("), (") == 0  # one row: the new message
    with closing(sqlite3.connect(db)) as conn:
        bases = conn.execute("SELECT id, base FROM records ORDER BY seq").fetchall()
        assert sum(r[0] for r in conn.execute("SELECT refs FROM message_refs")) == 103
    assert bases == [("t0", None), ("t1", 1)]
    assert_consistent(db)
    reader = SqliteReader(db)
    got = reader.get("t1")
    reader.close()
    assert got is not None
    assert got["original"] == history(101)


def test_pruning_a_base_hands_its_counts_to_the_next_turn(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    sink = SqliteSink(db, max_age_days=1)
    for i in range(5):
        sink.write(turn(builder, history(3 + i), f"t{i}", T0 + i * 3600, body=TOOLS))
    assert_consistent(db)
    for i in range(5):
        assert sink.prune(now=T0 + i * 3600 + 86400 + 1) == 1
        assert_consistent(db)
        reader = SqliteReader(db)
        left = [reader.get(f"t{k}") for k in range(i + 1, 5)]
        reader.close()
        assert [r["original"] for r in left if r is not None] == [
            history(3 + k) for k in range(i + 1, 5)
        ]
    sink.close()
    with closing(sqlite3.connect(db)) as conn:
        assert rows_left(conn) == [0, 0, 0]


def test_a_base_another_worker_pruned_is_not_used(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    mine, other = SqliteSink(db), SqliteSink(db, max_age_days=1)
    mine.write(turn(builder, history(2), "old", T0))
    assert other.prune(now=T0 + 86400 + 1) == 1  # the other worker's retention
    mine.write(turn(builder, history(3), "new", T0 + 86400 + 2))
    mine.close()
    other.close()
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT base FROM records").fetchall() == [(None,)]
    assert_consistent(db)


def test_a_reused_seq_is_not_taken_for_the_base(tmp_path: Path) -> None:
    # Retention emptied the store: the next record gets seq 1 again, another conversation's.
    db = str(tmp_path / "a.db")
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    mine, other = SqliteSink(db), SqliteSink(db, max_age_days=1)
    mine.write(turn(builder, history(2), "mine-1", T0))
    other.prune(now=T0 + 86400 + 1)
    other.write(turn(builder, history(2, task="another task"), "other-1", T0 + 86400 + 2))
    mine.write(turn(builder, history(3), "mine-2", T0 + 86400 + 3))
    mine.close()
    other.close()
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT seq, id, base FROM records ORDER BY seq").fetchall()
    assert rows == [(1, "other-1", None), (2, "mine-2", None)]
    assert_consistent(db)


def test_a_failed_batch_is_not_remembered_as_a_base(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    sink = SqliteSink(db)
    sink.write(turn(builder, history(2), "t0", T0))
    conn = sink._connection()
    conn.execute("CREATE TRIGGER no_t1 BEFORE INSERT ON records WHEN new.id = 't1' "
                 "BEGIN SELECT RAISE(ABORT, 'refused'); END")  # fmt: skip
    with pytest.raises(sqlite3.IntegrityError, match="refused"):
        sink.write(turn(builder, history(3), "t1", T0 + 1))
    conn.execute("DROP TRIGGER no_t1")
    sink.write(turn(builder, history(4), "t2", T0 + 2))
    sink.close()
    with closing(sqlite3.connect(db)) as check:
        assert check.execute("SELECT id, base FROM records").fetchall() == [
            ("t0", None),
            ("t2", 1),
        ]
    assert_consistent(db)


# A store's life: turns of a few conversations (growing, forking, sometimes curated, some
# with tools, written by two workers, in batches, their times sometimes out of order), and
# retention deleting the oldest few at any point.
CONVERSATIONS = st.sampled_from(["a", "b", "c"])
STEP = st.one_of(
    st.tuples(
        st.just("write"),
        st.integers(0, 1),  # which worker
        st.lists(
            st.tuples(CONVERSATIONS, st.integers(0, 6), st.booleans(), st.booleans()),
            min_size=1,
            max_size=3,
        ),
        st.floats(-3, 3),  # time skew: concurrent turns finish out of order
    ),
    st.tuples(st.just("prune"), st.integers(1, 4)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(STEP, max_size=14))
def test_counts_stay_exact_through_writes_and_pruning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[Any]
) -> None:
    monkeypatch.setattr(sqlite_refs, "CHAIN_MIN_REFS", 5)  # some records small, some big
    with tempfile.TemporaryDirectory(dir=tmp_path) as where:
        store_life(str(Path(where) / "a.db"), steps)


def store_life(db: str, steps: list[Any]) -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    sinks = [SqliteSink(db), SqliteSink(db)]
    clock = T0
    n = 0
    for step in steps:
        if step[0] == "prune":
            conn = sinks[0]._connection()
            sqlite_sink._delete_oldest(conn, limit=step[1])
        else:
            _, worker, turns, skew = step
            batch = []
            for name, size, curated, tools in turns:
                clock += 1
                messages = history(size, task=name)
                kw: dict[str, Any] = {"body": TOOLS} if tools else {}
                if curated:
                    kw["curated"] = messages[:1] + messages[-1:]
                batch.append(turn(builder, messages, f"r{n}", clock + skew, **kw))
                n += 1
            sinks[worker].write_many(batch)
        assert_consistent(db)
    conn = sinks[0]._connection()
    while sqlite_sink._delete_oldest(conn, limit=3):
        pass
    with transaction(conn):
        left = rows_left(conn)
    for sink in sinks:
        sink.close()
    assert left == [0, 0, 0]


def test_a_trimmed_history_still_finds_its_previous_turn(tmp_path: Path) -> None:
    # A client that drops its oldest messages (a sliding window) still resends the newest.
    db = str(tmp_path / "a.db")
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    sink = SqliteSink(db)
    messages = history(40)
    sink.write(turn(builder, messages, "t0", T0))
    sink.write(turn(builder, messages[:1] + messages[5:] + history(42)[-2:], "t1", T0 + 1))
    sink.write(turn(builder, history(3, task="another task"), "x", T0 + 2))
    sink.close()
    with closing(sqlite3.connect(db)) as conn:
        bases = conn.execute("SELECT id, base FROM records ORDER BY seq").fetchall()
    assert bases == [("t0", None), ("t1", 1), ("x", None)]
    assert_consistent(db)


def test_a_base_gone_missing_keeps_the_counts_rather_than_free_early(tmp_path: Path) -> None:
    # Only a store edited by hand loses a named base; pruning then never frees a body early.
    db = str(tmp_path / "a.db")
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    sink = SqliteSink(db, max_age_days=1)
    sink.write(turn(builder, history(2), "t0", T0 + 86400))
    sink.write(turn(builder, history(3), "t1", T0))
    sink._connection().execute("DELETE FROM records WHERE id = 't0'")
    assert sink.prune(now=T0 + 86400 + 1) == 1
    sink.close()
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 5  # all kept


def test_small_records_count_together_without_bases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_refs, "CHAIN_MIN_REFS", 16)
    db = str(tmp_path / "a.db")
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    sink = SqliteSink(db)
    sink.write_many([turn(builder, history(2), f"s{i}", T0 + i) for i in range(3)])
    sink.write_many([turn(builder, history(14), "big", T0 + 3)])
    small = history(2)  # curated: its messages referenced twice, counted twice
    last = [
        turn(builder, small, "s3", T0 + 4, curated=small[:1] + small[-1:]),
        turn(builder, history(15), "b2", T0 + 5),
    ]
    sink.write_many(last)
    sink.close()
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT seq, id, base FROM records ORDER BY seq").fetchall()
    assert rows == [
        (1, "s0", None),
        (2, "s1", None),
        (3, "s2", None),
        (4, "big", None),
        (5, "s3", None),  # in a batch with a big one: numbered by the sink, no base
        (6, "b2", 4),
    ]
    assert_consistent(db)
