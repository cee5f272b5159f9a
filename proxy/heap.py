"""Handing freed memory back to the system after big work (`HeapTrim`).

A never-seen 127k-token request allocates and frees hundreds of MB of strings and lists: in
the curation thread that plans it, and in the audit writer that redacts and stores its
record. The C allocator keeps what was freed for reuse, and the process's RSS stays where
it peaked: measured here, a worker that had curated and audited a few hundred such
requests sat at ~290 MB RSS idle, for good, instead of ~95 MB. After big work, the thread
that did it calls glibc's `malloc_trim` (all arenas), at most once per `TRIM_INTERVAL_S`;
a call that comes sooner is made when the interval is up (a timer thread), so what the last
job of a burst freed goes back too. Without that, two big jobs 0.3 s apart (80 MB of
strings made and freed each) left the process at 75 MB RSS for as long as no more big work
came; with it, back to 11 MB a second later. Where there is no glibc, nothing is trimmed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections.abc import Callable

TRIM_INTERVAL_S = 1.0


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim  # ctypes lets the GIL go meanwhile
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


class HeapTrim:
    """`malloc_trim(0)` when due, or as soon as it is; each thread that does big work keeps
    its own."""

    def __init__(self, *, interval_s: float = TRIM_INTERVAL_S) -> None:
        self._trim = _malloc_trim()
        self._interval = interval_s
        self._at = float("-inf")
        self._lock = threading.Lock()
        self._pending: threading.Timer | None = None
        self.count = 0

    def __call__(self) -> None:
        if self._trim is None:
            return
        with self._lock:
            wait = self._at + self._interval - time.monotonic()
            if wait > 0:
                if self._pending is None:
                    self._pending = threading.Timer(wait, self._due)
                    self._pending.daemon = True
                    self._pending.start()
                return
            self._at = time.monotonic()
        self._run()

    def _due(self) -> None:
        with self._lock:
            self._pending = None
            self._at = time.monotonic()
        self._run()

    def _run(self) -> None:
        if self._trim is not None:
            self._trim(0)
            self.count += 1
