"""The disk spool (`audit.spool`): records round-trip whole and in order, bodies left out by a
store-by-reference record are made again, what was spooled survives a reopen (a restart),
the size and age bounds drop and count; and `SpooledSink` in front of a flaky store: straight
through while healthy, spooled while down (order kept, nothing lost, nothing twice), replayed
when it is back, also by a new sink on the same file, and shown in its health."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import orjson
import pytest

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.health import health_body
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.spool import sink as spool_sink
from proxy.observability.audit.spool.sink import SpooledSink
from proxy.observability.audit.spool.store import Spool
from tests import factories as f
from tests.factories import audited
from tests.proxy.observability.audit.test_writer_outage import FlakyStore, wait_until


def records(n: int, start: int = 0, *, by_reference: bool = False) -> list[AuditRecord]:
    builder = RecordBuilder(Redactor.build(), by_reference=by_reference)
    history = [f.system("You are an agent."), f.user("Fix the tests.")]
    out = []
    for i in range(start, start + n):
        history = [*history, f.assistant(f"step {i}"), f.user(f"ok {i}")]
        out.append(builder.build(audited(id=f"r{i:04d}", time=1000.0 + i, original=history)))
    return out


def ids(found: list[AuditRecord]) -> list[str]:
    return [r.fields["id"] for r in found]


def spool(tmp_path: Path, **bounds: float) -> Spool:
    settings = {"max_bytes": 2**30, "max_age_s": 3600.0, **bounds}
    return Spool(str(tmp_path / "spool.db"), **settings)  # type: ignore[arg-type]


def test_records_round_trip_whole_and_in_order_across_a_reopen(tmp_path: Path) -> None:
    written = records(5, by_reference=True)  # later records leave resent bodies out
    assert any(m.data is None for m in written[-1].original)
    first = spool(tmp_path)
    assert first.is_empty()
    assert first.append(written[:3])
    assert first.append(written[3:])
    first.close()
    again = spool(tmp_path)  # as a restarted proxy finds it
    peeked = again.peek(10)
    assert [seq for seq, _ in peeked] == [1, 2, 3, 4, 5]
    for (_, back), sent in zip(peeked, written, strict=True):
        assert back.as_dict() == sent.as_dict()
        assert back.time == sent.time
    assert again.state().records == 5
    again.consume(peeked[2][0])
    assert ids([r for _, r in again.peek(10)]) == ["r0003", "r0004"]
    again.consume(peeked[-1][0])
    assert again.is_empty()
    assert again._conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)


def test_past_max_bytes_a_batch_is_refused_and_the_spool_ends_one_batch_over(
    tmp_path: Path,
) -> None:
    small = spool(tmp_path, max_bytes=64 * 1024)
    kept = 0
    for batch in range(40):
        if small.append(records(5, start=batch * 5)):
            kept += 5
    assert 0 < kept < 200
    assert small.state().records == kept
    assert small.state().bytes < 64 * 1024 + 64 * 1024  # at most one batch over


def test_records_older_than_max_age_expire(tmp_path: Path) -> None:
    aged = spool(tmp_path, max_age_s=60.0)
    aged.append(records(3))
    assert aged.expire(time.time() + 30) == 0
    assert aged.expire(time.time() + 61) == 3
    assert aged.is_empty()


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool_sink, "TICK_S", 0.05)


def sink(tmp_path: Path, store: FlakyStore, **bounds: float) -> SpooledSink:
    return SpooledSink(store, spool(tmp_path, **bounds))  # type: ignore[arg-type]


@pytest.mark.usefixtures("fast")
def test_down_then_back_every_record_once_and_in_order(tmp_path: Path) -> None:
    store = FlakyStore()
    store.up.set()
    spooled = sink(tmp_path, store)
    all_records = records(30)
    spooled.write_many(all_records[:10])  # healthy: straight through
    assert ids(store.records) == ids(all_records[:10])
    store.up.clear()
    spooled.write_many(all_records[10:20])  # down: to the spool, no error for the writer
    spooled.write_many(all_records[20:])
    detail = spooled.health()
    assert detail.state == "degraded"
    assert detail.spool is not None
    assert detail.spool[0] == 20
    body = orjson.loads(health_body(spooled))
    assert body["audit"]["spool"]["records"] == 20
    store.up.set()
    wait_until(lambda: len(store.records) == 30, "the replay")
    assert ids(store.records) == ids(all_records)
    wait_until(lambda: spooled.health().state == "ok", "health back")
    wait_until(lambda: health_body(spooled) == b'{"status":"ok"}', "healthz back")
    spooled.close()


@pytest.mark.usefixtures("fast")
def test_a_new_sink_replays_what_a_closed_one_left_in_the_spool(tmp_path: Path) -> None:
    down = FlakyStore()
    first = sink(tmp_path, down)
    first.write_many(records(7))
    first.close()  # the proxy stops while the store is down
    assert down.records == []
    back = FlakyStore()
    back.up.set()
    second = sink(tmp_path, back)  # restarted: the store is back
    wait_until(lambda: len(back.records) == 7, "the replay after a restart")
    second.write_many(records(2, start=7))
    assert ids(back.records) == [f"r{i:04d}" for i in range(9)]
    second.close()


@pytest.mark.usefixtures("fast")
def test_a_full_spool_drops_counts_and_logs_once_per_episode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore()
    drops: list[tuple[str, int]] = []
    spooled = SpooledSink(
        store,  # type: ignore[arg-type]
        spool(tmp_path, max_bytes=64 * 1024),
        on_dropped=lambda reason, n: drops.append((reason, n)),
    )
    with caplog.at_level(logging.WARNING, logger="curator.audit"):
        for batch in range(40):
            spooled.write_many(records(5, start=batch * 5))
        assert drops
        assert {reason for reason, _ in drops} == {"full"}
        dropped = sum(n for _, n in drops)
        store.up.set()
        ended = f"the spool is empty again; {dropped} records were dropped"
        wait_until(lambda: ended in caplog.text, "the episode's end")
    assert len(store.records) + dropped == 200
    full = [r for r in caplog.records if "past its limits" in r.getMessage()]
    assert len(full) == 1
    spooled.close()
