"""Background threads yield the CPU to the event loop.

A worker's event loop shares its process with threads doing big work off the loop: the
curation thread (a never-seen 127k-token body is ~35 ms of tokenizing), the audit writer
(redaction, hashing, SQLite) and the spend thread. They take turns at the GIL, and where
the loop's core is busy (a container with one CPU, a host under load) the OS scheduler
decides which runnable thread gets the core when the GIL changes hands. At the same
priority the loop loses about as often as it wins, and every small streaming turn waits.

So each background thread lowers its own priority (Linux: `setpriority` on the thread id
affects that thread only) by a few nice steps: the loop then wins the core whenever it is
runnable, and the background work runs in the time it leaves, as fast as before when the
loop is idle. Measured on the `hol` bench case (server pinned to one core): loop ticks more
than 5 ms late 8-11% -> 3-4%, small streaming TTFT p50 6.5 -> 3.7 ms, with as many big
bodies curated meanwhile. Other systems keep the default priority.
"""

from __future__ import annotations

import os
import sys
import threading

CURATION_STEPS = 10
"""Nice steps below the process for the curation thread (the biggest GIL user)."""
BOOKKEEPING_STEPS = 5
"""For the audit writer and the spend thread: lower, but not so low that a saturated host
starves the audit log (its queue is bounded, and drops are counted)."""
MAX_NICE = 19


def lower_thread_priority(steps: int) -> int | None:
    """Lower the calling thread's priority by `steps` nice steps (Linux only); its new
    nice value, or None where this is not possible."""
    if sys.platform != "linux":
        return None
    tid = threading.get_native_id()
    try:
        nice = min(MAX_NICE, os.getpriority(os.PRIO_PROCESS, tid) + steps)
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:
        return None
    return nice
