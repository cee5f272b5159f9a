"""Whether the audit store takes writes: the writer's view, for logs and `/healthz`.

The writer reports each batch's fate here. The first failure of a healthy store and the
first success of a degraded one are logged, once each; in between, retries back off
exponentially (`next_retry`), and `/healthz` shows the store as degraded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import orjson

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0


@dataclass(frozen=True, slots=True)
class HealthDetail:
    """The store's state for a readiness detail: `ok`, or `degraded` since when."""

    state: str
    since: float | None = None
    failures: int = 0


class StoreHealth:
    """Tracks one writer's store: ok or degraded, with the backoff between retries."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        first_s: float = BACKOFF_FIRST_S,
        max_s: float = BACKOFF_MAX_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._log = logger
        self._first = first_s
        self._max = max_s
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0

    def failed(self, reason: str, held: int) -> float:
        """A write found the store unavailable; the seconds to wait before the next try."""
        with self._lock:
            first = self._since is None
            if first:
                self._since = self._clock()
            self._failures += 1
            failures = self._failures
        if first:
            self._log.error(
                "audit: the store is unavailable (%s); holding %d records and retrying "
                "with backoff (records beyond audit.max_queue or max_queue_bytes are "
                "dropped and counted)",
                reason,
                held,
            )
        return float(min(self._max, self._first * 2 ** min(failures - 1, 16)))

    def succeeded(self, written: int) -> None:
        with self._lock:
            was, self._since, failures = self._since, None, self._failures
            self._failures = 0
        if was is not None:
            self._log.warning(
                "audit: the store is back after %.1f s and %d failed tries; %d held records "
                "written",
                self._clock() - was,
                failures,
                written,
            )

    def detail(self) -> HealthDetail:
        with self._lock:
            if self._since is None:
                return HealthDetail("ok")
            return HealthDetail("degraded", self._since, self._failures)


class Reports(Protocol):
    def health(self) -> HealthDetail: ...


def health_body(audit: Reports | None) -> bytes:
    """`/healthz`'s JSON: `{"status":"ok"}`, plus the audit's state while it is degraded."""
    detail = None if audit is None else audit.health()
    if detail is None or detail.state == "ok":
        return b'{"status":"ok"}'
    return orjson.dumps(
        {
            "status": "ok",
            "audit": {"state": detail.state, "since": detail.since, "tries": detail.failures},
        }
    )
