"""Handing freed memory back to the system after big work (`HeapTrim`).

A never-seen 127k-token request allocates and frees hundreds of MB of strings and lists: in
the curation thread that plans it, and in the audit writer that redacts and stores its
record. The C allocator keeps what was freed for reuse, and the process's RSS stays where
it peaked: measured here, a worker that had curated and audited a few hundred such
requests sat at ~290 MB RSS idle, for good, instead of ~95 MB. After big work, the thread
that did it asks for glibc's `malloc_trim` (all arenas): at most once per `TRIM_INTERVAL_S`,
and a request inside the interval is carried out when it ends, so the last of a burst of
big bodies is given back too (after the bench's cold-body cases, a trim then gave back
another 8 MB). The trim runs in a short-lived thread of its own, not in the thread that
asked: a curation used to wait ~0.4 ms for it before the request went on. Where there is
no glibc, nothing is trimmed.
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
    """`malloc_trim(0)` when asked, at most once per interval; each thread that does big
    work keeps its own."""

    def __init__(self, *, interval_s: float = TRIM_INTERVAL_S) -> None:
        self._trim = _malloc_trim()
        self._interval = interval_s
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._due: threading.Timer | None = None
        self.count = 0

    def __call__(self) -> None:
        """Ask for a trim: now, or when the interval since the last one ends."""
        if self._trim is None:
            return
        with self._lock:
            if self._due is not None:
                return  # the trim due will give back this work's memory too
            wait = max(0.0, self._at + self._interval - time.monotonic())
            self._due = threading.Timer(wait, self._run)
            self._due.name = "curator-heap-trim"
            self._due.daemon = True
            self._due.start()

    def close(self) -> None:
        with self._lock:
            if self._due is not None:
                self._due.cancel()
                self._due = None

    def _run(self) -> None:
        with self._lock:
            self._at = time.monotonic()
            self._due = None  # asked again while trimming: a trim after the interval
        if self._trim is not None:
            self._trim(0)
        with self._lock:
            self.count += 1
