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

A lower priority gives the loop the larger share of the core, not the core the moment it
wakes: Linux's scheduler (EEVDF, 6.6 and later) lets the thread running finish its slice
(1.4 ms on this 2-core machine) first, and a woken thread preempts it only with a shorter
slice of its own (6.12 and later: `sched_setattr`'s `sched_runtime`). So `curator serve`
asks for the shortest slice, 0.1 ms, for each worker's event loop thread (`shorten_slice`),
and for it alone: threads it starts begin with the default again. Measured on the `hol`
bench case (server on one core), thirteen alternating pairs with and without: loop ticks
more than 5 ms late 1-12 -> 0-4 of ~900, small streaming TTFT p99 under the load median
8.0 -> 6.8 ms, as many big bodies curated; a 1 ms watchdog thread found the loop more
than 4 ms behind 55-58 -> 9-14 times a run. Small-request throughput, the warm
127k-token request and the concurrency-1 tail did not move (alternating pairs).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import MappingProxyType

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


def let_the_loop_in() -> None:
    """Let go of the GIL for a moment, from a background thread: a thread that waits for it
    (the event loop) gets it now, not at the end of a switch interval."""
    time.sleep(0)


LOOP_SLICE_NS = 100_000
"""The event loop thread's scheduler slice: the shortest the kernel grants."""
_SCHED_ATTR_SYSCALLS = MappingProxyType({"x86_64": (314, 315), "aarch64": (274, 275)})
"""(sched_setattr, sched_getattr) by machine."""
_FAIR_POLICIES = (0, 3)
"""SCHED_OTHER and SCHED_BATCH: the policies whose slice `sched_runtime` sets."""
_RESET_ON_FORK = 0x01
"""SCHED_FLAG_RESET_ON_FORK: threads the caller starts get the default slice."""


class _SchedAttr(ctypes.Structure):
    """`struct sched_attr` of sched_setattr(2), as of Linux 4.13 (56 bytes)."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
        ("sched_util_min", ctypes.c_uint32),
        ("sched_util_max", ctypes.c_uint32),
    ]


def shorten_slice(slice_ns: int = LOOP_SLICE_NS) -> int | None:
    """Ask for `slice_ns`-long scheduler slices for the calling thread, so that it
    preempts a thread with longer ones as soon as it wakes; threads it starts later keep
    the default. The slice in effect, or None where there is no such setting (Linux before
    6.12, another system, a policy other than the normal ones, a refused call)."""
    current = _sched_attr(0)
    if current is None or current.sched_policy not in _FAIR_POLICIES:
        return None
    current.size = ctypes.sizeof(_SchedAttr)
    current.sched_runtime = slice_ns
    current.sched_flags = _RESET_ON_FORK
    setattr_nr = _SCHED_ATTR_SYSCALLS[platform.machine()][0]
    if _syscall(setattr_nr, 0, ctypes.byref(current), 0) != 0:
        return None
    return thread_slice(0)


def thread_slice(tid: int) -> int | None:
    """The scheduler slice of thread `tid` (0: the caller) in nanoseconds, or None where
    the kernel does not say (before Linux 6.12 it reports 0 for the normal policies)."""
    attr = _sched_attr(tid)
    if attr is None or attr.sched_policy not in _FAIR_POLICIES:
        return None
    return attr.sched_runtime or None


def _sched_attr(tid: int) -> _SchedAttr | None:
    numbers = _SCHED_ATTR_SYSCALLS.get(platform.machine())
    if sys.platform != "linux" or numbers is None:
        return None
    attr = _SchedAttr()
    if _syscall(numbers[1], tid, ctypes.byref(attr), ctypes.sizeof(attr), 0) != 0:
        return None
    return attr


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result: int = libc.syscall(ctypes.c_long(number), *args)
    return result


LONGEST_TURN_S = 0.25
"""How long other threads wait for one turn at most: past that (a store that hangs, a huge
body) they go ahead without one, and the rest go ahead at once until it ends. A never-seen
127k-token body's curation takes ~30 ms alone and up to ~60 under load, its record ~15-25;
at 50 ms the turns ran out under the `hol` bench's load, and the loop was late as often
as without them."""


class Turns:
    """Which of a worker's background threads runs Python: one at a time, first come first
    served, each for a unit of work (`turn()`): a curation job; an audit batch, built and
    written, handed over between records when another thread waits (`Turn.hand_over`) and
    the writer keeps up. No turn holds the others up for more than `longest_s`: past that
    they go ahead.

    Why: the event loop gets the GIL back from one busy thread within a switch interval,
    but not from two. A thread waiting for the GIL asks its holder to drop it only when no
    switch happened during its whole wait, and two busy threads switch between themselves
    every interval, so the loop can wait many of them (CPython 3.11, `ceval_gil.h`). Measured
    (`python -m bench.turns_bench`, one core): beside one busy thread no loop tick was over
    1.2 ms late; beside two, ~11% of ticks were over 5 ms late, the worst 10 ms; with the
    two taking turns, 0.1%. On the `hol` bench case, loop ticks over 5 ms late 13-22 -> 2-7
    of ~895 (docs/performance-history.md).
    """

    __slots__ = ("_cond", "_longest", "_next", "_serving", "_since", "_skipped")

    def __init__(self, longest_s: float = LONGEST_TURN_S) -> None:
        self._longest = longest_s
        self._cond = threading.Condition(threading.Lock())
        self._next = 0
        """The ticket the next thread to ask gets."""
        self._serving = 0
        """The ticket whose thread has the turn, or gets it next."""
        self._since = 0.0
        """When the current turn began (time.monotonic)."""
        self._skipped: set[int] = set()
        """Tickets whose threads stopped waiting (went ahead without a turn)."""

    @contextmanager
    def turn(self) -> Iterator[Turn]:
        """The calling thread's turn, for the `with` block (or until it waited too long)."""
        turn = Turn(self, self.take())
        try:
            yield turn
        finally:
            if turn.held:
                self.give()

    def take(self) -> bool:
        """Wait for a turn, in the order asked. True: it is the caller's (`give` it back);
        False: the turn before ran past `longest_s`, and the caller goes ahead without."""
        with self._cond:
            ticket = self._next
            self._next += 1
            while self._serving != ticket:
                left = self._since + self._longest - time.monotonic()
                if left <= 0:
                    self._skipped.add(ticket)
                    return False
                self._cond.wait(left)
            self._since = time.monotonic()
            return True

    def give(self) -> None:
        """End the caller's turn (it must hold it): the next thread waiting has it now."""
        with self._cond:
            self._serving += 1
            while self._serving in self._skipped:
                self._skipped.remove(self._serving)
                self._serving += 1
            self._since = time.monotonic()
            self._cond.notify_all()

    def waiting(self) -> int:
        """How many threads wait for a turn."""
        with self._cond:
            return max(0, self._next - self._serving - len(self._skipped) - 1)


class Turn:
    """One thread's turn (`Turns.turn`)."""

    __slots__ = ("_turns", "held")

    def __init__(self, turns: Turns, held: bool) -> None:
        self._turns = turns
        self.held = held
        """False while the thread goes ahead without one (`Turns.take`)."""

    def hand_over(self) -> bool:
        """When another thread waits, let it run first, then take a turn again (at the end
        of the line). Whether it did."""
        if not self._turns.waiting():
            return False
        if self.held:
            self._turns.give()
        self.held = self._turns.take()
        return True
