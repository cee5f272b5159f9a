from __future__ import annotations

import errno
import logging
import os
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path

import pytest

from proxy.config.audit import AuditConfig
from proxy.observability.audit.configured import open_audit
from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.base import Sink
from proxy.observability.audit.sinks.jsonl import JsonlSink
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.audit.writer import (
    AuditStats,
    AuditWriter,
    RateLimitedLog,
    WriteOutcome,
)
from proxy.observability.exchange import BIG_BYTES, ExchangeRecord
from proxy.priority import BOOKKEEPING_STEPS, MAX_NICE
from tests.factories import audited

KEY = "ghp_" + "Ab3De5Gh7J" * 4
T0 = 1_767_225_600.0
WAIT = 30.0


def entry(i: int) -> ExchangeRecord:
    return audited(id=f"r{i}", time=T0 + i, original=[{"role": "user", "content": f"{i} {KEY}"}])


class MemorySink:
    """Keeps records in a list, noting which thread did the work."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.threads: set[str] = set()
        self.prunes = 0
        self.closed = False
        self.batches: list[int] = []

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        self.batches.append(len(records))
        for record in records:
            self.write(record)

    def write(self, record: AuditRecord) -> None:
        self.threads.add(threading.current_thread().name)
        self.records.append(record)

    def prune(self, now: float | None = None) -> int:  # noqa: ARG002 (the Sink protocol)
        self.prunes += 1
        return 0

    def close(self) -> None:
        self.closed = True


class BlockingSink(MemorySink):
    """Holds the first write until released, so the queue can be filled deterministically."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.release = threading.Event()

    def write(self, record: AuditRecord) -> None:
        self.started.set()
        assert self.release.wait(WAIT)
        super().write(record)


class FullDisk(MemorySink):
    def write(self, record: AuditRecord) -> None:  # noqa: ARG002 (the Sink protocol)
        raise OSError(errno.ENOSPC, "No space left on device")


def writer(
    sink: MemorySink,
    *,
    max_queue: int = 10_000,
    prune_interval_s: float = 300.0,
    on_outcome: Callable[[WriteOutcome], None] | None = None,
) -> AuditWriter:
    return AuditWriter(
        sink,
        RecordBuilder(Redactor.build()),
        max_queue=max_queue,
        prune_interval_s=prune_interval_s,
        on_outcome=on_outcome,
    )


def test_close_flushes_a_burst_in_order_in_few_batches() -> None:
    sink = MemorySink()
    w = writer(sink)
    for i in range(300):
        assert w.submit(entry(i))
    assert w.close(WAIT)
    assert [r.fields["id"] for r in sink.records] == [f"r{i}" for i in range(300)]
    assert w.stats() == AuditStats(written=300, dropped=0, failed=0, queue_depth=0)
    assert sink.closed
    # One wake-up and one transaction for many records, not one each.
    assert len(sink.batches) <= 3, sink.batches


def test_an_entry_that_cannot_be_built_fails_alone(caplog: pytest.LogCaptureFixture) -> None:
    class Picky(RecordBuilder):
        def build(self, entry: ExchangeRecord) -> AuditRecord:
            if entry.id == "r1":
                raise ValueError("unbuildable")
            return super().build(entry)

    sink = MemorySink()
    w = AuditWriter(sink, Picky(Redactor.build()))
    with caplog.at_level(logging.ERROR, logger="curator.audit"):
        for i in range(3):
            w.submit(entry(i))
        assert w.close(WAIT)
    assert [r.fields["id"] for r in sink.records] == ["r0", "r2"]
    assert (w.stats().written, w.stats().failed) == (2, 1)
    assert "unbuildable" in caplog.text


def test_redaction_and_writing_happen_in_the_writer_thread() -> None:
    sink = MemorySink()
    w = writer(sink)
    w.submit(entry(1))
    assert w.close(WAIT)
    assert sink.threads == {"curator-audit"}
    assert KEY.encode() not in sink.records[0].to_json()


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")
def test_the_writer_thread_runs_below_the_event_loop_priority() -> None:
    seen: list[int] = []

    class Noting(RecordBuilder):
        def build(self, entry: ExchangeRecord) -> AuditRecord:
            seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            return super().build(entry)

    w = AuditWriter(MemorySink(), Noting(Redactor.build()))
    w.submit(entry(1))
    assert w.close(WAIT)
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen == [min(MAX_NICE, base + BOOKKEEPING_STEPS)]


def test_full_queue_drops_and_counts_without_blocking(caplog: pytest.LogCaptureFixture) -> None:
    sink = BlockingSink()
    outcomes: list[WriteOutcome] = []
    w = writer(sink, max_queue=3, on_outcome=outcomes.append)
    assert w.submit(entry(0))
    assert sink.started.wait(WAIT)  # the thread holds entry 0; the queue is empty again
    assert all(w.submit(entry(i)) for i in (1, 2, 3))
    with caplog.at_level(logging.WARNING, logger="curator.audit"):
        assert not any(w.submit(entry(i)) for i in range(4, 9))
    assert w.stats() == AuditStats(written=0, dropped=5, failed=0, queue_depth=3)
    dropped_logs = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped_logs) == 1  # rate-limited
    assert "queue is full (3 records)" in dropped_logs[0].getMessage()
    sink.release.set()
    assert w.close(WAIT)
    assert w.stats() == AuditStats(written=4, dropped=5, failed=0, queue_depth=0)
    assert outcomes.count("dropped") == 5
    assert outcomes.count("written") == 4


def test_submit_after_close_is_a_counted_drop() -> None:
    w = writer(MemorySink())
    assert w.close(WAIT)
    assert w.submit(entry(1)) is False
    assert w.stats().dropped == 1
    assert w.close(WAIT)  # closing twice is harmless


@pytest.mark.parametrize(
    "make_sink",
    [
        lambda d: SqliteSink(str(d / "file" / "audit.db")),
        lambda d: JsonlSink(str(d / "file" / "audit.jsonl")),
        lambda d: SqliteSink(str(d / "missing" / "dir" / "audit.db")),
    ],
    ids=["sqlite-under-a-file", "jsonl-under-a-file", "sqlite-missing-folder"],
)
def test_unwritable_path_counts_failures_and_logs_loudly_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make_sink: Callable[[Path], Sink]
) -> None:
    (tmp_path / "file").write_text("a file, not a folder")
    sink = make_sink(tmp_path)
    w = AuditWriter(sink, RecordBuilder(Redactor.build()))
    with caplog.at_level(logging.ERROR, logger="curator.audit"):
        for i in range(5):
            assert w.submit(entry(i))
        assert w.close(WAIT)
    assert w.stats() == AuditStats(written=0, dropped=0, failed=5, queue_depth=0)
    failures = [r for r in caplog.records if "writing a record failed" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].levelno == logging.ERROR


def test_full_disk_counts_failures(caplog: pytest.LogCaptureFixture) -> None:
    w = writer(FullDisk())
    with caplog.at_level(logging.ERROR, logger="curator.audit"):
        w.submit(entry(1))
        w.submit(entry(2))
        assert w.close(WAIT)
    assert w.stats().failed == 2
    assert "No space left on device" in caplog.text


def test_store_recovers_when_the_path_becomes_writable(tmp_path: Path) -> None:
    blocker = tmp_path / "audit"
    blocker.write_text("in the way")
    path = blocker / "audit.db"
    sink = BlockingGate(SqliteSink(str(path)))
    w = AuditWriter(sink, RecordBuilder(Redactor.build()))
    w.submit(entry(1))
    assert sink.passed.wait(WAIT)
    blocker.unlink()
    blocker.mkdir()
    w.submit(entry(2))
    assert w.close(WAIT)
    assert (w.stats().failed, w.stats().written) == (1, 1)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT id FROM records").fetchall() == [("r2",)]


class BlockingGate:
    """Wraps a sink and signals after each write attempt."""

    def __init__(self, inner: SqliteSink) -> None:
        self.inner = inner
        self.passed = threading.Event()

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        try:
            self.inner.write_many(records)
        finally:
            self.passed.set()

    def prune(self, now: float | None = None) -> int:
        return self.inner.prune(now)

    def close(self) -> None:
        self.inner.close()


def test_retention_runs_in_the_writer_thread_not_per_write() -> None:
    sink = MemorySink()
    w = writer(sink, prune_interval_s=3600.0)
    for i in range(50):
        w.submit(entry(i))
    assert w.close(WAIT)
    assert sink.prunes == 1  # once at start, then only every prune_interval_s


def test_a_failing_outcome_callback_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    def broken(outcome: WriteOutcome) -> None:
        raise ValueError(outcome)

    sink = MemorySink()
    w = writer(sink, on_outcome=broken)
    with caplog.at_level(logging.ERROR, logger="curator.audit"):
        w.submit(entry(1))
        assert w.close(WAIT)
        assert w.submit(entry(2)) is False
    assert len(sink.records) == 1
    assert w.stats().written == 1
    assert "outcome callback failed" in caplog.text


def test_masked_records_are_reported(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Redactor):
        def text(self, text: str) -> str:  # noqa: ARG002 (overrides Redactor.text)
            raise RuntimeError("detector bug")

    sink = MemorySink()
    w = AuditWriter(sink, RecordBuilder(Broken(())))
    with caplog.at_level(logging.ERROR, logger="curator.audit"):
        w.submit(entry(1))
        assert w.close(WAIT)
    assert sink.records[0].fields["redaction"] == "failed"
    assert "redaction failed (RuntimeError); request r1" in caplog.text
    assert KEY not in caplog.text


def test_rate_limited_log_reports_what_it_held_back(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    report = RateLimitedLog(logging.getLogger("test.rate"), 60.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="test.rate"):
        for _ in range(4):
            report("k", logging.ERROR, "failed %s", "x")
        report("other", logging.ERROR, "another kind")
        now[0] += 61
        report("k", logging.ERROR, "failed %s", "y")
    assert [r.getMessage() for r in caplog.records] == [
        "failed x",
        "another kind",
        "failed y (3 more like this since the last report)",
    ]


def test_open_audit_builds_a_working_writer(tmp_path: Path) -> None:
    assert open_audit(AuditConfig(sink="none")) is None
    path = tmp_path / "a.db"
    w = open_audit(AuditConfig(path=str(path), max_queue=5, cache_bytes=12345))
    assert w is not None
    assert w._building._builder._cache.max_bytes == 12345  # audit.cache_bytes reaches the builder
    w.submit(entry(1))
    assert w.close(WAIT)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 1


def test_an_idle_writer_holds_no_exchange_it_wrote() -> None:
    """A big exchange is built in the thread; written, it must not stay in the thread's
    hands until the next one comes (it holds its request's parsed body)."""

    class Message(dict[str, str]):
        """A message that takes weak references."""

    message = Message(role="user", content="hello")
    gone = weakref.ref(message)
    sink = MemorySink()
    w = writer(sink)
    assert w.submit(audited(id="big", time=T0, original=[message], request_bytes=BIG_BYTES))
    del message
    deadline = time.monotonic() + WAIT
    while (not sink.records or gone() is not None) and time.monotonic() < deadline:
        time.sleep(0.01)  # nothing is submitted after it
    assert [r.fields["id"] for r in sink.records] == ["big"]
    assert gone() is None
    assert w.close(WAIT)
