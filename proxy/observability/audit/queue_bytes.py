"""The audit queue's bound in bytes (`audit.max_queue_bytes`), beside its bound in records.

A record waits with its exchange: the parsed request and the response kept of it. With
the store unreachable, 300 requests of 1 MB took the process from idle to +290 MB, and
`max_queue: 10000` allowed ~9 GB. So each entry's bytes (the request and response as
relayed) are counted from `submit` until the store took it or it failed, held batches
included, and an entry that would pass the bound is dropped and counted. One entry is
always let in when nothing waits, so a single big request is still audited.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from proxy.observability.audit.capture import BodyCapture
from proxy.observability.exchange import ExchangeRecord


def entry_bytes(entry: ExchangeRecord) -> int:
    """The request's and the kept response's bytes, as relayed."""
    response = entry.response
    kept = response.size if isinstance(response, BodyCapture) else len(response or "")
    return (entry.request_bytes or 0) + kept


class QueueBytes:
    """Bytes of the entries the writer holds, each counted by the id of what was queued."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        """Queued, and taken by the thread but not yet written (held in an outage)."""
        self._sizes: dict[int, int] = {}
        self._lock = threading.Lock()

    def admit(self, queued: object, size: int) -> bool:
        """Count `queued` (the entry or its record) in; False when that would pass the bound."""
        with self._lock:
            if self.total and self.total + size > self.limit:
                return False
            self.total += size
            self._sizes[id(queued)] = size
            return True

    def forget(self, queued: object) -> None:
        """`queued` never made it into the queue after all."""
        self.release(self.claim((queued,)))

    def claim(self, taken: Iterable[object]) -> int:
        """The bytes of what the thread took from the queue (still counted in `total`)."""
        with self._lock:
            return sum(self._sizes.pop(id(item), 0) for item in taken)

    def release(self, size: int) -> None:
        """Written or failed: no longer held."""
        with self._lock:
            self.total -= size
