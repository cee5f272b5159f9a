"""The writer while its store is unavailable: batches held and retried with backoff, the
queue bounding what waits, state changes logged once, the health detail for /healthz."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import orjson
import pytest

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.health import HealthDetail, StoreHealth, health_body
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.base import StoreUnavailable
from proxy.observability.audit.writer import AuditWriter
from tests.proxy.observability.audit.test_writer import WAIT, entry


class FlakyStore:
    """Unavailable until `up` is set; then keeps what it is given."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.records: list[AuditRecord] = []
        self.tries = 0

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        self.tries += 1
        if not self.up.is_set():
            raise StoreUnavailable("postgres: connection refused")
        self.records.extend(records)

    def prune(self, now: float | None = None) -> int:  # noqa: ARG002 (the Sink protocol)
        return 0

    def close(self) -> None:
        pass


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_held_then_written_once_when_the_store_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FlakyStore()
    w = AuditWriter(store, RecordBuilder(Redactor.build()), max_queue=100)
    with caplog.at_level(logging.INFO, logger="curator.audit"):
        for i in range(10):
            assert w.submit(entry(i))
        wait_until(lambda: store.tries >= 2, "a retry")
        assert w.health().state == "degraded"
        assert w.stats().failed == 0
        store.up.set()
        wait_until(lambda: w.stats().written == 10, "the held records")
        assert w.close(WAIT)
    assert [r.fields["id"] for r in store.records] == [f"r{i}" for i in range(10)]
    assert w.health() == HealthDetail("ok")
    messages = [r.getMessage() for r in caplog.records]
    assert sum("store is unavailable" in m for m in messages) == 1
    assert sum("store is back" in m for m in messages) == 1


def test_past_max_queue_records_are_dropped_and_counted() -> None:
    store = FlakyStore()
    w = AuditWriter(store, RecordBuilder(Redactor.build()), max_queue=5)
    assert w.submit(entry(0))
    wait_until(lambda: store.tries >= 1, "the first try")
    accepted = sum(w.submit(entry(i)) for i in range(1, 21))
    assert accepted == 5  # the queue's size; one batch more is held by the thread
    assert w.stats().dropped == 15
    store.up.set()
    assert w.close(WAIT)
    assert w.stats().written == 6


def test_closing_during_an_outage_counts_the_rest_failed_promptly() -> None:
    store = FlakyStore()
    w = AuditWriter(store, RecordBuilder(Redactor.build()), max_queue=50)
    for i in range(8):
        w.submit(entry(i))
    wait_until(lambda: w.health().state == "degraded", "the outage")
    started = time.monotonic()
    assert w.close(WAIT)
    assert time.monotonic() - started < WAIT / 2  # no waiting out the backoff
    assert w.stats().failed == 8


def test_backoff_doubles_up_to_its_cap() -> None:
    health = StoreHealth(logging.getLogger("test.health"), first_s=0.5, max_s=4.0)
    waits = [health.failed("down", 0) for _ in range(6)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    health.succeeded(0)
    assert health.failed("down", 0) == 0.5


def test_health_body_shows_the_audit_only_while_degraded() -> None:
    class Writer:
        detail = HealthDetail("ok")

        def health(self) -> HealthDetail:
            return self.detail

    writer = Writer()
    assert health_body(None) == health_body(writer) == b'{"status":"ok"}'
    writer.detail = HealthDetail("degraded", 1.5, 3)
    body = orjson.loads(health_body(writer))
    assert body == {"status": "ok", "audit": {"state": "degraded", "since": 1.5, "tries": 3}}


def test_past_max_queue_bytes_records_are_dropped_until_written() -> None:
    store = FlakyStore()
    w = AuditWriter(store, RecordBuilder(Redactor.build()), max_queue_bytes=5_000_000)
    big = [entry(i) for i in range(21)]
    for one in big:
        one.request_bytes = 1_000_000
    assert w.submit(big[0])
    wait_until(lambda: store.tries >= 1, "the first try")
    accepted = sum(w.submit(one) for one in big[1:20])
    assert accepted == 4  # 5 MB with the batch the thread holds
    assert w.stats().dropped == 15
    store.up.set()
    wait_until(lambda: w.stats().written == 5, "the held and queued records")
    assert w.submit(big[20])  # written, their bytes no longer count
    assert w.close(WAIT)
    assert w.stats().written == 6


def test_one_entry_bigger_than_max_queue_bytes_is_let_in_when_none_waits() -> None:
    store = FlakyStore()
    store.up.set()
    w = AuditWriter(store, RecordBuilder(Redactor.build()), max_queue_bytes=1000)
    one = entry(0)
    one.request_bytes = 1_000_000
    assert w.submit(one)
    assert w.close(WAIT)
    assert w.stats().written == 1
