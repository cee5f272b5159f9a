"""A logger wrapper that says each kind of thing at most once per interval."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

LOG_INTERVAL_S = 60.0


class RateLimitedLog:
    """Logs each kind of message at most once per interval, saying how many it held back."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str, level: int, message: str, *args: object) -> None:
        with self._lock:
            now = self._clock()
            last = self._last.get(key)
            if last is not None and now - last < self._interval:
                self._held[key] = self._held.get(key, 0) + 1
                return
            self._last[key] = now
            held = self._held.pop(key, 0)
        if held:
            message += f" ({held} more like this since the last report)"
        self._logger.log(level, message, *args)
