"""Jobs the writer's thread runs for others (`AuditWriter.run_soon`), and the metrics' spend
thread handing its jobs over to it (`SpendThread.share`); the thread's turns with the
curation thread."""

from __future__ import annotations

import threading
import time
from functools import partial

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.writer import AuditWriter
from proxy.observability.exchange import ExchangeRecord
from proxy.observability.usage.counterfactual import SpendThread
from proxy.priority import Turns
from tests.proxy.observability.audit.test_writer import WAIT, BlockingSink, MemorySink, entry
from tests.proxy.observability.audit.test_writer_outage import FlakyStore, wait_until


class NotingBuilder(RecordBuilder):
    """Notes each record it builds in `order`."""

    def __init__(self, order: list[str]) -> None:
        super().__init__(Redactor.build())
        self.order = order

    def build(self, entry: ExchangeRecord) -> AuditRecord:
        self.order.append(entry.id)
        return super().build(entry)


def test_a_job_runs_in_the_writer_thread_in_order_with_the_records() -> None:
    order: list[str] = []
    sink = MemorySink()
    w = AuditWriter(sink, NotingBuilder(order))
    assert w.submit(entry(0))
    assert w.submit(entry(1))
    assert w.run_soon(lambda: order.append(threading.current_thread().name))
    assert w.submit(entry(2))
    assert w.close(WAIT)
    assert order == ["r0", "r1", "curator-audit", "r2"]
    assert [r.fields["id"] for r in sink.records] == ["r0", "r1", "r2"]
    assert w.stats().written == 3


def test_a_failing_job_is_logged_and_the_records_are_still_written() -> None:
    sink = MemorySink()
    w = AuditWriter(sink, RecordBuilder(Redactor.build()))
    assert w.run_soon(lambda: 1 / 0)  # type: ignore[func-returns-value]
    assert w.submit(entry(1))
    assert w.close(WAIT)
    assert [r.fields["id"] for r in sink.records] == ["r1"]


def test_a_job_is_refused_when_full_closed_or_held_and_nothing_is_counted() -> None:
    blocking = BlockingSink()
    full = AuditWriter(blocking, RecordBuilder(Redactor.build()), max_queue=1)
    assert full.submit(entry(0))
    assert blocking.started.wait(WAIT)  # the thread holds entry 0: the queue is empty
    assert full.run_soon(lambda: None)  # takes the one slot
    assert not full.run_soon(lambda: None)
    blocking.release.set()
    assert full.close(WAIT)
    assert not full.run_soon(lambda: None)
    assert full.stats().dropped == 0

    store = FlakyStore()
    held = AuditWriter(store, RecordBuilder(Redactor.build()))
    assert held.submit(entry(1))
    wait_until(lambda: store.tries >= 1, "the first try")
    assert not held.run_soon(lambda: None)  # an outage would hold it for minutes
    store.up.set()
    wait_until(lambda: held.stats().written == 1, "the held record")
    assert held.run_soon(lambda: None)
    assert held.close(WAIT)


def test_the_spend_thread_hands_its_jobs_to_the_carrier_and_runs_what_it_refuses() -> None:
    carried: list[str] = []
    accept = threading.Event()
    accept.set()

    def carrier(job: object) -> bool:
        if accept.is_set():
            carried.append("job")
            job()  # type: ignore[operator]
        return accept.is_set()

    spend = SpendThread(name="curator-spend-test")
    spend.share(carrier)
    ran: list[str] = []
    spend.submit(lambda: ran.append(threading.current_thread().name))
    assert ran == [threading.current_thread().name]  # the carrier ran it, here
    assert "curator-spend-test" not in {t.name for t in threading.enumerate()}
    accept.clear()
    spend.submit(lambda: ran.append(threading.current_thread().name))
    assert spend.join(WAIT)
    assert ran[1] == "curator-spend-test"
    assert carried == ["job"]
    spend.close()


JOBS = 50
WINDOW = 0.1
"""The writer's batch window: what is queued within it is one batch."""


def slow_job(done: list[int], n: int, started: threading.Event) -> None:
    started.set()
    time.sleep(0.002)  # longer than the writer's stretch between hand-overs
    done.append(n)


def test_the_thread_works_only_in_its_turn_and_hands_it_over_between_records() -> None:
    """The curation thread shares the turns: while it plans, the writer builds nothing; when
    it asks in the middle of a batch, it gets the turn at the next record (`Turns`)."""
    turns = Turns(longest_s=WAIT)
    sink = MemorySink()
    done: list[int] = []
    started = threading.Event()
    w = AuditWriter(sink, RecordBuilder(Redactor.build()), turns=turns, batch_window_s=WINDOW)
    turns.take()  # planning
    for n in range(JOBS):
        assert w.run_soon(partial(slow_job, done, n, started))
    assert w.submit(entry(JOBS))  # a small record: built here, written by the thread
    time.sleep(WINDOW + 0.1)  # all of it in one batch, waiting for its turn
    assert (done, sink.records) == ([], [])
    turns.give()
    assert started.wait(WAIT)
    turns.take()  # mid-batch
    ran = len(done)
    assert ran < JOBS
    time.sleep(0.02)
    assert len(done) == ran  # nothing ran while the turn was held
    turns.give()
    assert w.close(WAIT)
    assert done == list(range(JOBS))
    assert [r.fields["id"] for r in sink.records] == [f"r{JOBS}"]


def test_a_store_that_hangs_holds_the_curation_thread_up_for_one_turn_at_most() -> None:
    """The write is in a turn too (SQLite's work competes for the GIL), but a database that
    does not answer must not stall planning: past the longest turn, planning goes ahead."""
    turns = Turns(longest_s=0.05)
    blocking = BlockingSink()
    w = AuditWriter(blocking, RecordBuilder(Redactor.build()), turns=turns, batch_window_s=0)
    assert w.submit(entry(0))
    assert blocking.started.wait(WAIT)  # the thread is inside write_many, stuck
    assert turns.waiting() == 0
    assert not turns.take()  # went ahead after ~50 ms
    blocking.release.set()
    assert w.close(WAIT)
    assert [r.fields["id"] for r in blocking.records] == ["r0"]
    assert turns.take()  # the writer gave its turn back


def test_behind_the_thread_keeps_its_turn_until_its_batch_is_written() -> None:
    """More queued meanwhile means the writer is behind: handing its turn over after every
    record, it would let exchanges in faster than it writes them, and the queue would hold
    every big body meanwhile."""
    turns = Turns(longest_s=WAIT)
    sink = MemorySink()
    done: list[int] = []
    started = threading.Event()
    w = AuditWriter(sink, RecordBuilder(Redactor.build()), turns=turns, batch_window_s=WINDOW)
    for n in range(JOBS):
        assert w.run_soon(partial(slow_job, done, n, started))
    assert started.wait(WAIT)  # the batch holds every job
    assert w.submit(entry(JOBS))  # queued behind the batch
    with turns.turn() as turn:
        assert turn.held
        assert done == list(range(JOBS))  # the whole batch went first
        assert [r.fields["id"] for r in sink.records] == []  # not in it: the next one
    assert w.close(WAIT)
    assert [r.fields["id"] for r in sink.records] == [f"r{JOBS}"]
