"""`SpooledSink`: a remote audit store (PostgreSQL) behind a local disk spool (`audit.spool`).

The writer hands it batches as to any sink. While the spool is empty and the store healthy,
a batch goes straight to the store. A batch the store cannot take (`StoreUnavailable`: down,
unreachable, slower than its statement timeout), and every batch after it while the spool
holds anything, goes to the spool instead, durably (`spool.store`), so order is kept; the
writer counts it written. A thread of its own replays the spool to the store, oldest first,
a batch per transaction, retrying with backoff (`StoreHealth`), and takes a batch out of
the spool only once the store committed it: a crash in between replays it, and the store's
idempotent insert (keyed by the record's uid) keeps it once. A proxy restarted while the
store is still down finds the spool as it left it, and replays it once the store is back.

With `--workers N` every worker appends to the same spool file; the one holding its lock
file (`<path>.lock`, an flock the kernel releases when its holder dies) replays it.

Bounds (`audit.spool.max_bytes`, `max_age_hours`): a batch that finds the spool full is
dropped, and records spooled longer than the age limit are dropped; both are counted
(`on_dropped`) and logged once per episode, an episode lasting until the spool is empty.
A spool that cannot be written (its disk full, say) raises `StoreUnavailable`: the writer
then holds the batch in memory, as it does without a spool.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.health import HealthDetail, StoreHealth
from proxy.observability.audit.sinks.base import Sink, StoreUnavailable
from proxy.observability.audit.spool.store import Spool, SpoolState

log = logging.getLogger("curator.audit")

TICK_S = 1.0
"""How often the replay thread looks at the spool (expiry, metrics, its lock) when idle."""
REPLAY_BATCH = 200
"""Records per replayed transaction."""
CLOSE_WAIT_S = 3.0
OnState = Callable[[SpoolState], None]
OnDropped = Callable[[str, int], None]
"""(reason: `full` or `expired`, how many records)."""


class SpooledSink:
    """`inner` behind `spool`; see the module docstring."""

    def __init__(
        self,
        inner: Sink,
        spool: Spool,
        *,
        on_state: OnState | None = None,
        on_dropped: OnDropped | None = None,
    ) -> None:
        self._inner = inner
        self._spool = spool
        self._on_state = on_state
        self._on_dropped = on_dropped
        where = (
            f"in the disk spool {spool.path} (beyond audit.spool.max_bytes, dropped and counted)"
        )
        self._health = StoreHealth(log, keeping=where)
        self._store_lock = threading.Lock()  # the inner sink: one thread at a time
        self._retry_at = 0.0
        self._dropping = 0  # records dropped in the current episode
        self._drop_lock = threading.Lock()
        self._state = spool.state()
        self._lease: int | None = None
        self._lease_path = spool.path + ".lock"
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="curator-audit-spool", daemon=True)
        self._thread.start()

    # -- the writer's side ------------------------------------------------------------------
    def write_many(self, records: Sequence[AuditRecord]) -> None:
        if self._spooling():
            self._to_spool(records)
            return
        with self._store_lock:
            if self._spooling():  # the replay thread may have spooled meanwhile: keep order
                self._to_spool(records)
                return
            try:
                self._inner.write_many(records)
            except StoreUnavailable as exc:
                self._failed(exc, len(records))
                self._to_spool(records)
                return
        self._health.succeeded(len(records))

    def prune(self, now: float | None = None) -> int:
        """Retention in the store; the store unavailable is the replay thread's to retry."""
        with self._store_lock:
            try:
                pruned = self._inner.prune(now)
            except StoreUnavailable as exc:
                self._failed(exc, 0)
                return 0
        self._health.succeeded(0)
        return pruned

    def health(self) -> HealthDetail:
        state = self._state
        spool = (state.records, state.bytes, state.age_s(time.time()))
        return replace(self._health.detail(), spool=spool)

    def close(self) -> None:
        self._closing.set()
        self._wake.set()
        self._thread.join(CLOSE_WAIT_S)
        if self._thread.is_alive():  # a replay still waiting on the store: the exit ends it
            log.warning("audit: closing with a replay of the spool in progress")
            return
        self._inner.close()
        if self._lease is not None:
            os.close(self._lease)  # releases the flock
        self._spool.close()

    def _spooling(self) -> bool:
        return time.monotonic() < self._retry_at or not self._spool.is_empty()

    def _to_spool(self, records: Sequence[AuditRecord]) -> None:
        try:
            kept = self._spool.append(records)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"spool {self._spool.path}: {exc}") from None
        if not kept:
            self._dropped("full", len(records))
        self._publish()  # `health()` reads the figures, never the file (the event loop asks)
        self._wake.set()

    # -- the replay thread -------------------------------------------------------------------
    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                self._tick()
            except Exception:  # the replay must outlive a bug in one tick
                log.exception("audit: replaying the spool failed; retrying")
            self._wake.wait(TICK_S)
            self._wake.clear()

    def _tick(self) -> None:
        self._publish()
        if self._state.age_s(time.time()) > self._spool.max_age_s:
            self._dropped("expired", self._spool.expire())
            self._publish()
        if not self._state.records:
            with self._drop_lock:
                dropped, self._dropping = self._dropping, 0
            if dropped:
                log.warning("audit: the spool is empty again; %d records were dropped", dropped)
            if self._health.detail().state != "ok" and time.monotonic() >= self._retry_at:
                self.prune()  # is the store back? (another worker replayed the spool, say)
            return
        if time.monotonic() >= self._retry_at and self._leased():
            self._replay()
            self._publish()

    def _replay(self) -> None:
        """Replay the spool's oldest batches until it is empty, the store fails, or closing."""
        while not self._closing.is_set():
            batch = self._spool.peek(REPLAY_BATCH)
            if not batch:
                return
            with self._store_lock:
                try:
                    self._inner.write_many([record for _, record in batch])
                except StoreUnavailable as exc:
                    self._failed(exc, self._state.records)
                    return
                except Exception as exc:  # records the store refuses: stuck for ever else
                    log.error("audit: the store refused %d spooled records: %s", len(batch), exc)
                    self._dropped("refused", len(batch))
                self._spool.consume(batch[-1][0])
            self._health.succeeded(len(batch))

    def _failed(self, exc: StoreUnavailable, held: int) -> None:
        self._retry_at = time.monotonic() + self._health.failed(str(exc), held)

    def _leased(self) -> bool:
        """Whether this process holds the spool's replay lock (taking it if free)."""
        if self._lease is None:
            fd = os.open(self._lease_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            self._lease = fd
        return True

    def _publish(self) -> None:
        self._state = self._spool.state()
        if self._on_state is not None:
            with contextlib.suppress(Exception):  # metrics must not stop the replay
                self._on_state(self._state)

    def _dropped(self, reason: str, count: int) -> None:
        with self._drop_lock:
            first = not self._dropping
            self._dropping += count
        if first and count:
            log.error(
                "audit: the spool %s is past its limits (%s); records are dropped and counted "
                "until it is empty again",
                self._spool.path,
                reason,
            )
        if count and self._on_dropped is not None:
            with contextlib.suppress(Exception):
                self._on_dropped(reason, count)
