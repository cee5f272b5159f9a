"""Handing freed memory back to the system after big work (`HeapTrim`).

A never-seen 127k-token request allocates and frees hundreds of MB of strings and lists: in
the curation thread that plans it, and in the audit writer that redacts and stores its
record. The C allocator keeps what was freed for reuse, and the process's RSS stays where
it peaked: measured here, a worker that had curated and audited a few hundred such
requests sat at ~290 MB RSS idle, for good, instead of ~95 MB. After big work, the thread
that did it calls glibc's `malloc_trim` (all arenas), at most once per `TRIM_INTERVAL_S`.
Where there is no glibc, nothing is trimmed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
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
    """`malloc_trim(0)` when due; each thread that does big work keeps its own."""

    def __init__(self, *, interval_s: float = TRIM_INTERVAL_S) -> None:
        self._trim = _malloc_trim()
        self._interval = interval_s
        self._at = float("-inf")
        self.count = 0

    def __call__(self) -> None:
        now = time.monotonic()
        if self._trim is not None and now - self._at >= self._interval:
            self._at = now
            self._trim(0)
            self.count += 1
