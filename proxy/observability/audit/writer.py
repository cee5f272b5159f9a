"""The audit writer: a bounded queue drained by one background thread, off the request path.

`submit` runs on the request path, so it never blocks and never raises: when the queue is
full the entry is dropped and counted. A small exchange's record is built in `submit`, when
the thread is not building (`proxy.observability.audit.building`); the others in the thread,
in batches: woken by an entry, the thread lets `batch_window_s` pass (not for a big
exchange), then builds all queued and writes it in one go (one SQLite transaction),
in turns with the curation thread (`proxy.priority.Turns`), handing the turn
over between records when that waits (at ~4,000 small requests/s, a transaction and a
wake-up per record cost ~150 us of CPU a request; batched, ~20 us). A batch the sink
rejects counts its records as failed, logged at a bounded rate. A store that is unavailable
(`StoreUnavailable`: database down, connection lost, disk full, read-only) keeps its batch:
the thread retries it with backoff while new entries wait, up to `max_queue` records and
`max_queue_bytes` (`queue_bytes`), past which they are dropped and counted; `health()`
says so, for `/healthz` (a remote store's disk spool: `audit.spool`). One writer per
process (in the app's lifespan): threads do not survive the fork of `--workers` (a process
of its own was measured slower). Jobs queued with `run_soon` run in order with the records:
the uncurated-cost job needs the counterfactual the record's build computes anyway.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from proxy.heap import HeapTrim
from proxy.observability.audit.building import Building
from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.health import HealthDetail, StoreHealth
from proxy.observability.audit.queue_bytes import QueueBytes, entry_bytes
from proxy.observability.audit.ratelog import RateLimitedLog
from proxy.observability.audit.sinks.base import Sink, StoreUnavailable
from proxy.observability.audit.upkeep import close_sink, prune
from proxy.observability.exchange import ExchangeRecord
from proxy.priority import BOOKKEEPING_STEPS, Turns, let_the_loop_in, lower_thread_priority

log = logging.getLogger("curator.audit")

WriteOutcome = Literal["written", "dropped", "failed"]
Job = Callable[[], None]
Queued = ExchangeRecord | AuditRecord | Job | None
PRUNE_INTERVAL_S = 300.0
BATCH_WINDOW_S = 0.02
"""How long the thread waits, once woken, for more entries to write with the first (not
when one queued is big: `ExchangeRecord.big`)."""
BATCH_MAX = 1000
YIELD_AFTER_S = 0.0005
"""Longest stretch the thread builds records without offering the GIL to the event loop
(and its turn to a waiting thread). Without it: +58% p50 at 1,000 small requests/s; after
every record instead, ~20% of throughput flat out lost in GIL hand-offs."""


@dataclass(frozen=True, slots=True)
class AuditStats:
    """Counters for the metrics layer: records written, dropped (queue full), failed."""

    written: int
    dropped: int
    failed: int
    queue_depth: int


class AuditWriter:
    """Queues exchange records and writes their audit records from one background thread."""

    def __init__(
        self,
        sink: Sink,
        builder: RecordBuilder,
        *,
        max_queue: int = 10_000,
        max_queue_bytes: int = 64 * 2**20,
        prune_interval_s: float = PRUNE_INTERVAL_S,
        batch_window_s: float = BATCH_WINDOW_S,
        on_outcome: Callable[[WriteOutcome], None] | None = None,
        report: RateLimitedLog | None = None,
        turns: Turns | None = None,
    ) -> None:
        self._sink = sink
        self.turns = turns or Turns()  # shared with the curation thread (`Turns`)
        self._queue: queue.Queue[Queued] = queue.Queue(max_queue)
        self._bytes = QueueBytes(max_queue_bytes)
        self._held_bytes = 0  # of `_held`, and of the batch being written
        self._prune_interval, self._batch_window = prune_interval_s, batch_window_s
        self._trim = HeapTrim()
        self._on_outcome = on_outcome
        self._report = report or RateLimitedLog(log)
        self._building = Building(builder, self._report, self._failed)
        self._counts: dict[WriteOutcome, int] = {"written": 0, "dropped": 0, "failed": 0}
        self._lock = threading.Lock()
        self._closed, self._closing = False, threading.Event()
        self._health = StoreHealth(log)
        self._held: list[AuditRecord] = []  # built, the store could not take them yet
        self._retry_in = 0.0
        self._thread = threading.Thread(target=self._run, name="curator-audit", daemon=True)
        self._thread.start()

    def submit(self, entry: ExchangeRecord) -> bool:
        """Queue an entry; False (and counted as dropped) if the queue is full or closed."""
        try:
            reason = self._queue_entry(entry)
        except Exception as exc:  # the request path must never see an audit error
            reason = f"unexpected {type(exc).__name__}"
        if reason is None:
            return True
        self._count("dropped")
        self._report("dropped", logging.WARNING, "audit: record dropped: %s", reason)
        return False

    def _queue_entry(self, entry: ExchangeRecord) -> str | None:
        """Why `entry` could not be queued; None once it is (or its build failed, counted)."""
        if self._closed:
            return "the audit writer is closed"
        built = self._building.here(entry)
        if built is None:
            return None
        if not self._bytes.admit(built, entry_bytes(entry)):
            return f"the audit queue is full ({self._bytes.limit} bytes, max_queue_bytes)"
        try:
            self._queue.put_nowait(built)
        except queue.Full:
            self._bytes.forget(built)
            return f"the audit queue is full ({self._queue.maxsize} records)"
        return None

    def run_soon(self, job: Job) -> bool:
        """Queue `job` to run in the writer's thread after the entries queued before it;
        False (nothing counted) when it cannot be: the queue is full, the writer closed,
        or a store outage holds the thread back."""
        if self._closed or self._held:
            return False
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            return False
        return True

    def queue_depth(self) -> int:
        return self._queue.qsize()

    def stats(self) -> AuditStats:
        with self._lock:
            counts = dict(self._counts)
        return AuditStats(**counts, queue_depth=self._queue.qsize())

    def health(self) -> HealthDetail:
        # A sink that tracks its store itself (`audit.spool.sink`) reports for it.
        sinks: Callable[[], HealthDetail] | None = getattr(self._sink, "health", None)
        return sinks() if sinks is not None else self._health.detail()

    def close(self, timeout: float = 10.0) -> bool:
        """Write what is queued, then stop. False if that did not finish within `timeout`."""
        deadline = time.monotonic() + timeout
        with self._lock:
            already, self._closed = self._closed, True
        self._closing.set()  # a thread waiting out a store outage makes its last try now
        if not already:
            # A queue still full at the deadline means the thread is stuck: join reports it.
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=timeout)
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            queued = self._queue.qsize()
            log.error("audit: %d records still queued at shutdown were not written", queued)
            return False
        # A submit racing with close can land behind the stop marker: count it, not lose it
        # (a job there is let go: the metrics it fed are closing too).
        with contextlib.suppress(queue.Empty):
            while True:
                if isinstance(self._queue.get_nowait(), ExchangeRecord | AuditRecord):
                    self._count("dropped")
        return True

    def _run(self) -> None:
        lower_thread_priority(BOOKKEEPING_STEPS)
        next_prune = time.monotonic()
        try:
            while True:
                if self._held:
                    if self._retry_held():
                        break
                    continue
                wait = max(0.0, next_prune - time.monotonic())
                try:
                    entries, stop = self._take(wait)
                except queue.Empty:
                    entries, stop = [], False  # time to prune
                if entries:
                    self._write(entries, final=stop)
                    entries = []  # idle, the writer holds no exchange (each its parsed request)
                    self._trim()  # their texts are freed now: give them back
                if stop:
                    break
                if time.monotonic() >= next_prune:
                    next_prune = time.monotonic() + self._prune_and_wait()
        finally:
            close_sink(self._sink)

    def _take(self, wait: float) -> tuple[list[ExchangeRecord | AuditRecord | Job], bool]:
        """The next batch, what the window gathered after the first entry, and whether the
        stop marker (None) ended it. Raises queue.Empty when nothing came within `wait`."""
        batch = [self._queue.get(timeout=wait)]
        self._drain(batch)
        if batch[-1] is not None and not any(
            isinstance(e, ExchangeRecord) and e.big() for e in batch
        ):
            time.sleep(self._batch_window)
            self._drain(batch)
        return [entry for entry in batch if entry is not None], batch[-1] is None

    def _drain(self, batch: list[Queued]) -> None:
        with contextlib.suppress(queue.Empty):
            while len(batch) < BATCH_MAX and batch[-1] is not None:
                batch.append(self._queue.get_nowait())

    def _retry_held(self) -> bool:
        """Wait out the backoff, then offer the held batch again; True once closing (the
        last try then takes everything still queued too)."""
        if not self._closing.wait(self._retry_in):
            self._write([], final=False)
            return False
        queued: list[Queued] = []
        with contextlib.suppress(queue.Empty):
            while True:
                queued.append(self._queue.get_nowait())
        self._write([entry for entry in queued if entry is not None], final=True)
        return True

    def _write(self, entries: Sequence[ExchangeRecord | AuditRecord | Job], *, final: bool) -> None:
        """Build the records of `entries` (the jobs among them run in their place) and write
        them after the held ones, in one turn (`Turns`). A curation job waiting meanwhile
        goes first at the next record, unless more is queued: behind, the writer keeps its
        turn, or the queue would grow, each big exchange in it holding its body."""
        records = [*self._held]
        self._held_bytes += self._bytes.claim(entries)
        with self.turns.turn() as turn:
            yielded = time.perf_counter()
            for entry in entries:
                if time.perf_counter() - yielded > YIELD_AFTER_S:
                    if not (self._queue.empty() and turn.hand_over()):
                        let_the_loop_in()
                    yielded = time.perf_counter()
                if (record := self._build_one(entry)) is not None:
                    records.append(record)
            self._store(records, final=final)

    def _build_one(self, entry: ExchangeRecord | AuditRecord | Job) -> AuditRecord | None:
        if isinstance(entry, ExchangeRecord):
            return self._building.record(entry)
        if isinstance(entry, AuditRecord):
            return entry
        try:
            entry()
        except Exception:  # a bug in one job must not stop the audit
            log.exception("audit: a bookkeeping job failed")
        return None

    def _store(self, records: list[AuditRecord], *, final: bool) -> None:
        """Write `records`; an unavailable store keeps them held for a retry, unless this
        is the last try before stopping."""
        self._held = []
        try:
            if records:
                self._sink.write_many(records)  # a store that hangs holds up the others
                self._health.succeeded(len(records))
        except Exception as exc:  # a bad batch must not take the proxy down with it
            if isinstance(exc, StoreUnavailable) and not final:
                self._retry_in = self._health.failed(str(exc), len(records))
                self._held = records
                return  # their bytes stay counted
            for _ in records:
                self._failed(exc)
        else:
            for _ in records:
                self._count("written")
        self._bytes.release(self._held_bytes)
        self._held_bytes = 0

    def _failed(self, exc: Exception) -> None:
        self._count("failed")
        self._report("failed", logging.ERROR, "audit: writing a record failed: %s", exc)

    def _prune_and_wait(self) -> float:
        wait = prune(self._sink, self._health, self._report)
        return self._prune_interval if wait is None else wait

    def _count(self, outcome: WriteOutcome) -> None:
        with self._lock:
            self._counts[outcome] += 1
        if self._on_outcome is not None:
            try:
                self._on_outcome(outcome)
            except Exception as exc:  # a metrics bug must not break auditing or requests
                self._report("callback", logging.ERROR, "audit: outcome callback failed: %s", exc)
