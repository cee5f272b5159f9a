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

And the threads that run Python for long (the curation thread, the audit writer) take
turns (`Turns`): while one runs, the other waits off the GIL, so the loop only ever
competes with one of them.
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


class Turns:
    """Which of a worker's background threads runs Python: one at a time, first come first
    served. Each holds its turn for a unit of work (a curation job; an audit batch, handed
    over between records when another thread waits: `hand_over`).

    Why: the event loop gets the GIL back from one busy thread within a switch interval,
    but not from two. A thread waiting for the GIL asks its holder to drop it only when no
    switch happened during its whole wait, and two busy threads switch between themselves
    every interval, so the loop can wait many of them (CPython 3.11, `ceval_gil.h`). Measured
    (`python -m bench.turns_bench`, one core): with one busy thread beside the loop no tick
    was over 1.1 ms late; with two, ~11% of ticks were over 5 ms late, the worst 10 ms; with
    the two taking turns, well under 1%. On the `hol` bench case (the curation thread and
    the audit writer both busy with never-seen 127k-token bodies): loop ticks over 5 ms late
    13-22 -> 2-4 of ~890, small streaming TTFT p99 11.0-12.5 -> 7.3-7.8 ms.
    """

    __slots__ = ("_cond", "_next", "_serving")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._next = 0
        """The ticket the next thread to ask gets."""
        self._serving = 0
        """The ticket whose holder has the turn (or gets it next)."""

    def __enter__(self) -> None:
        self.take()

    def __exit__(self, *_exc: object) -> None:
        self.give()

    def take(self) -> None:
        """Wait for this thread's turn (in the order asked)."""
        with self._cond:
            ticket = self._next
            self._next += 1
            while self._serving != ticket:
                self._cond.wait()

    def give(self) -> None:
        """End the calling thread's turn (it must hold it)."""
        with self._cond:
            self._serving += 1
            self._cond.notify_all()

    def waiting(self) -> int:
        """How many threads wait for a turn (besides the holder)."""
        return max(0, self._next - self._serving - 1)

    def hand_over(self) -> bool:
        """Called by the holder: when another thread waits, let it run first, then take
        the turn back (at the end of the line). Whether it did."""
        if not self.waiting():
            return False
        self.give()
        self.take()
        return True
