"""Which thread builds a record: `submit` itself for a small exchange while the builder is
free, the writer's thread for everything else (`proxy.observability.audit.building`)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from policies.pricing import PriceTable, Usage
from proxy.observability.audit.capture import BodyCapture
from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.writer import AuditStats, AuditWriter
from proxy.observability.exchange import BIG_BYTES, SMALL_BYTES, ExchangeRecord
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.spend import Sent, account
from tests import factories as f
from tests.proxy.observability.audit.test_writer import (
    KEY,
    WAIT,
    BlockingSink,
    MemorySink,
    entry,
)

RESPONSE = b'{"object":"chat.completion","choices":[]}'
SUBMITTER = threading.current_thread().name


class ThreadNoting(RecordBuilder):
    """Notes which thread built each record, by request id; `broken` ids raise."""

    def __init__(
        self, redactor: Redactor | None = None, broken: frozenset[str] = frozenset()
    ) -> None:
        super().__init__(redactor or Redactor.build())
        self.built: list[tuple[str, str]] = []
        self.broken = broken

    def build(self, entry: ExchangeRecord) -> AuditRecord:
        self.built.append((entry.id, threading.current_thread().name))
        if entry.id in self.broken:
            raise ValueError("unbuildable")
        return super().build(entry)


def sized(i: int, request_bytes: int | None, **fields: Any) -> ExchangeRecord:
    record = entry(i)
    record.request_bytes = request_bytes
    record.response = fields.pop("response", RESPONSE)
    for name, value in fields.items():
        setattr(record, name, value)
    return record


def pending_spend() -> Any:
    """A curated exchange's spend: its counterfactual is computed later, by the thread."""
    sent = Sent.of("gpt-4o", {}, [f.user("Fix it.")], [], Usage(input=40, output=5))
    spend = account(sent, f.counter(), PriceTable.with_overrides([]), Counterfactuals())
    assert not spend.deferred.ready
    return spend


def written(builder: ThreadNoting, *entries: ExchangeRecord) -> tuple[MemorySink, AuditWriter]:
    sink = MemorySink()
    w = AuditWriter(sink, builder)
    for one in entries:
        assert w.submit(one)
    assert w.close(WAIT)
    return sink, w


def _written_within(sink: MemorySink, count: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while len(sink.records) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    return len(sink.records) >= count


def test_a_small_exchange_is_built_by_submit_and_written_by_the_thread() -> None:
    builder = ThreadNoting()
    sink, w = written(builder, sized(1, 1000))
    assert builder.built == [("r1", SUBMITTER)]
    assert sink.threads == {"curator-audit"}
    assert KEY.encode() not in sink.records[0].to_json()  # redacted all the same
    assert w.stats() == AuditStats(written=1, dropped=0, failed=0, queue_depth=0)


@pytest.mark.parametrize(
    "exchange",
    [
        pytest.param(sized(1, None), id="a call the proxy made itself (size unknown)"),
        pytest.param(sized(1, SMALL_BYTES + 1), id="a large request"),
        pytest.param(sized(1, SMALL_BYTES - 10, response=b"x" * 11), id="request+response"),
        pytest.param(sized(1, 100, spend=pending_spend()), id="counterfactual not computed"),
    ],
)
def test_other_exchanges_are_built_in_the_thread(exchange: ExchangeRecord) -> None:
    builder = ThreadNoting()
    sink, _ = written(builder, exchange)
    assert builder.built == [("r1", "curator-audit")]
    assert len(sink.records) == 1


@pytest.mark.parametrize(
    ("kept", "where"),
    [(b"data: [DONE]\n\n", SUBMITTER), (b"data: " + b"x" * SMALL_BYTES, "curator-audit")],
)
def test_a_streamed_response_counts_the_bytes_it_kept(kept: bytes, where: str) -> None:
    capture = BodyCapture()
    capture.feed(kept)
    builder = ThreadNoting()
    written(builder, sized(1, 100, response=capture))
    assert builder.built == [("r1", where)]


def test_while_the_thread_builds_a_small_exchange_goes_to_it() -> None:
    builder = ThreadNoting()
    sink = MemorySink()
    w = AuditWriter(sink, builder)
    held, submitted = threading.Event(), threading.Event()

    def build_meanwhile() -> None:  # as the writer's thread does around each build
        with w._building._lock:
            held.set()
            submitted.wait(1.0)  # a submit that waited for the lock would get it after

    holder = threading.Thread(target=build_meanwhile)
    holder.start()
    assert held.wait(WAIT)
    assert w.submit(sized(1, 1000))  # at once: the event loop never waits for the builder
    submitted.set()
    holder.join()
    assert _written_within(sink, 1, WAIT)  # the thread is done with r1 and its lock
    assert w.submit(sized(2, 1000))
    assert w.close(WAIT)
    assert sorted(builder.built) == [("r1", "curator-audit"), ("r2", SUBMITTER)]
    assert [r.fields["id"] for r in sink.records] == ["r1", "r2"]


def test_records_are_written_in_submit_order_wherever_they_were_built() -> None:
    exchanges = [sized(i, 1000 if i % 2 else SMALL_BYTES * 2) for i in range(6)]
    builder = ThreadNoting()
    sink, _ = written(builder, *exchanges)
    assert [r.fields["id"] for r in sink.records] == [f"r{i}" for i in range(6)]
    assert {name for _, name in builder.built} == {SUBMITTER, "curator-audit"}


def test_a_small_record_that_cannot_be_built_is_counted_failed_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = ThreadNoting(broken=frozenset({"r1"}))
    with caplog.at_level(logging.ERROR, logger="curator.audit"):
        sink, w = written(builder, sized(0, 1000), sized(1, 1000), sized(2, 1000))
    assert [r.fields["id"] for r in sink.records] == ["r0", "r2"]
    assert [i for i, _ in builder.built] == ["r0", "r1", "r2"]  # r1 not tried again
    assert (w.stats().written, w.stats().failed) == (2, 1)
    assert "unbuildable" in caplog.text


def test_a_small_record_masked_by_broken_redaction_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Redactor):
        def text(self, text: str) -> str:  # noqa: ARG002 (overrides Redactor.text)
            raise RuntimeError("detector bug")

    builder = ThreadNoting(Broken(()))
    with caplog.at_level(logging.ERROR, logger="curator.audit"):
        sink, _ = written(builder, sized(1, 1000))
    assert builder.built == [("r1", SUBMITTER)]
    assert sink.records[0].fields["redaction"] == "failed"
    assert "redaction failed (RuntimeError); request r1" in caplog.text
    assert KEY not in caplog.text


@pytest.mark.parametrize("built", [True, False], ids=["built by submit", "for the thread"])
def test_a_record_that_lands_behind_the_stop_marker_is_a_counted_drop(built: bool) -> None:
    builder = ThreadNoting()
    w = AuditWriter(MemorySink(), builder)
    assert w.close(WAIT)
    late = sized(1, 1000)
    w._queue.put_nowait(builder.build(late) if built else late)  # as a submit racing close
    assert w.close(WAIT)  # what closing drains after the thread stopped is counted
    assert w.stats().dropped == 1


@pytest.mark.parametrize("behind", ["a job", "a built record"])
def test_a_big_exchange_starts_its_batch_at_once(behind: str) -> None:
    # A never-seen 127k-token history takes the thread ~15-25 ms to record: started 20 ms
    # late, it ran beside the agent's next turn.
    sink = BlockingSink()
    w = AuditWriter(sink, ThreadNoting(), batch_window_s=30.0)
    assert w.submit(sized(1, BIG_BYTES))
    assert sink.started.wait(WAIT)  # no window before it: the thread is writing it
    if behind == "a job":
        assert w.run_soon(lambda: None)
    else:
        assert w.submit(sized(2, 1000))  # built by submit: the builder is free
    assert w.submit(sized(3, BIG_BYTES))  # queued behind it: no window either
    sink.release.set()
    assert _written_within(sink, 2 if behind == "a job" else 3, 5.0)  # not 30 s
    w.close(WAIT)


@pytest.mark.parametrize("size", [1000, SMALL_BYTES + 1])
def test_other_records_wait_for_the_window_and_go_together(size: int) -> None:
    sink = MemorySink()
    w = AuditWriter(sink, ThreadNoting(), batch_window_s=0.3)
    assert w.submit(sized(1, size))
    time.sleep(0.05)
    assert w.submit(sized(2, size))
    assert _written_within(sink, 2, 5.0)
    assert sink.batches == [2]
    w.close(WAIT)
