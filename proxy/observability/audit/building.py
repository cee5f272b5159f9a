"""Where an audit record is built: in the writer's thread, or, for a small exchange
(`ExchangeRecord.small`), right away on the request's own thread (`Building.here`, from
`AuditWriter.submit`).

The thread batches its work and yields the GIL every half millisecond, yet each of its turns
interrupts the event loop. For a small record that costs the loop more than building it.
Measured on small passthrough requests, flat out, the server on one core: handing every
record to the thread meant ~0.4 forced context switches of the loop a request, against ~0.1
with small records built here; 484-523 against 416-448 us of CPU a request, and ~15% fewer
requests a second (docs/performance-history.md).

A record of a ~2 KB request builds in ~30 us, and in ~70-160 us at 4 KB with every message
never seen; it is the never-seen text that costs (~1 ms for 18 KB), so bigger records stay
in the thread. One `RecordBuilder` serves both: its cache is one thread's at a time
(`_lock`). The event loop never waits for it: while the thread builds, the entry goes to
the thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.ratelog import RateLimitedLog
from proxy.observability.exchange import ExchangeRecord


class Building:
    """Builds records with one builder, from the thread that may: see the module."""

    __slots__ = ("_builder", "_failed", "_lock", "_report")

    def __init__(
        self,
        builder: RecordBuilder,
        report: RateLimitedLog,
        failed: Callable[[Exception], None],
    ) -> None:
        self._builder = builder
        self._report = report
        self._failed = failed
        """Counts and logs an entry whose record could not be built."""
        self._lock = threading.Lock()

    def here(self, entry: ExchangeRecord) -> ExchangeRecord | AuditRecord | None:
        """A small exchange's record, when the builder is free; else the entry itself, for
        the thread. None when building failed (counted). A record whose counterfactual is
        not computed yet goes to the thread too: the thread computes them in order."""
        spend = entry.spend
        if not entry.small() or (spend is not None and not spend.deferred.ready):
            return entry
        if not self._lock.acquire(blocking=False):
            return entry
        try:
            return self._record(entry)
        finally:
            self._lock.release()

    def record(self, entry: ExchangeRecord) -> AuditRecord | None:
        """The entry's record, built in the writer's thread; None when that failed (counted)."""
        with self._lock:
            return self._record(entry)

    def _record(self, entry: ExchangeRecord) -> AuditRecord | None:
        try:
            record = self._builder.build(entry)
        except Exception as exc:  # one bad entry must not cost the others
            self._failed(exc)
            return None
        if record.fields.get("redaction") == "failed":
            self._report(
                "masked",
                logging.ERROR,
                "audit: redaction failed (%s); request %s is stored with its text masked",
                self._builder.last_failure,
                entry.id,
            )
        return record
