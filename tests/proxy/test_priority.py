"""priority.py: a background thread lowers its own priority, never the process's or the
event loop's; where it cannot (another system, a refused call) nothing changes. The event
loop thread's short scheduler slices are its own: neither other threads nor the ones it
starts get them, and its priority stays. Background threads take turns one at a time, in
the order asked; a holder hands its turn over to a waiting thread and gets it back after."""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from typing import cast

import pytest

from proxy import priority
from proxy.priority import (
    LOOP_SLICE_NS,
    MAX_NICE,
    Turns,
    lower_thread_priority,
    shorten_slice,
    thread_slice,
)

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")
with_slices = pytest.mark.skipif(
    thread_slice(0) is None, reason="per-thread slices are Linux 6.12's"
)


def own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def in_thread(fn: Callable[[], object]) -> object:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(10.0)
    return out[0]


@linux_only
def test_only_the_calling_thread_is_lowered() -> None:
    base = own_nice()

    def lower() -> tuple[int | None, int]:
        return lower_thread_priority(3), own_nice()

    assert in_thread(lower) == (min(MAX_NICE, base + 3),) * 2
    assert own_nice() == base
    assert os.getpriority(os.PRIO_PROCESS, 0) == base  # the process as a whole


@linux_only
def test_steps_stop_at_the_lowest_priority() -> None:
    assert in_thread(lambda: (lower_thread_priority(100), own_nice())) == (MAX_NICE, MAX_NICE)


def test_other_systems_keep_their_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(priority.sys, "platform", "darwin")
    monkeypatch.setattr(priority.os, "setpriority", lambda *a: calls.append(a))
    assert lower_thread_priority(5) is None
    assert calls == []


@linux_only
def test_a_refused_change_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise PermissionError("not allowed")

    monkeypatch.setattr(priority.os, "setpriority", refuse)
    assert lower_thread_priority(5) is None


@with_slices
def test_a_short_slice_is_the_calling_threads_alone() -> None:
    default = thread_slice(0)
    assert default is not None
    assert default > LOOP_SLICE_NS

    def shorten() -> tuple[int | None, int | None, int, object]:
        lower_thread_priority(2)  # a nice the slice must not undo
        got = shorten_slice()
        return got, thread_slice(0), own_nice(), in_thread(lambda: thread_slice(0))

    got, after, nice, started = cast(tuple[object, ...], in_thread(shorten))
    assert got == after == LOOP_SLICE_NS
    assert nice == min(MAX_NICE, own_nice() + 2)
    assert started == default  # a thread it starts begins with the default again
    assert thread_slice(0) == default  # this thread's own is untouched


@with_slices
def test_a_slice_is_asked_in_nanoseconds_within_the_kernels_bounds() -> None:
    assert in_thread(lambda: shorten_slice(250_000)) == 250_000
    assert in_thread(lambda: shorten_slice(1)) == LOOP_SLICE_NS  # the kernel's shortest


def test_no_slice_where_the_system_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def syscall(*args: object) -> int:
        calls.append(args)
        return 0

    monkeypatch.setattr(priority, "_syscall", syscall)
    monkeypatch.setattr(priority.sys, "platform", "darwin")
    assert shorten_slice() is None
    assert thread_slice(0) is None
    assert calls == []


@with_slices
def test_a_refused_slice_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = priority._syscall
    setattr_nr = priority._SCHED_ATTR_SYSCALLS[platform.machine()][0]

    def refuse_setattr(number: int, *args: object) -> int:
        return -1 if number == setattr_nr else real(number, *args)

    monkeypatch.setattr(priority, "_syscall", refuse_setattr)
    assert in_thread(shorten_slice) is None


@pytest.mark.parametrize(
    ("policy", "runtime"),
    [(1, 5_000_000), (0, 0)],
    ids=["a realtime thread keeps its own", "a kernel before 6.12 reports none"],
)
def test_no_slice_where_the_fair_scheduler_sets_none(
    monkeypatch: pytest.MonkeyPatch, policy: int, runtime: int
) -> None:
    def attr(_tid: int) -> object:
        found = priority._SchedAttr()
        found.sched_policy, found.sched_runtime = policy, runtime
        return found

    monkeypatch.setattr(priority, "_sched_attr", attr)
    monkeypatch.setattr(priority, "_syscall", lambda *_: 0)
    assert shorten_slice() is None
    assert thread_slice(0) is None


WAIT_S = 10.0


def wait_for_waiting(turns: Turns, count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while turns.waiting() != count:
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_turns_go_one_at_a_time_in_the_order_asked() -> None:
    turns = Turns(longest_s=WAIT_S)
    events: list[tuple[str, int]] = []
    assert turns.take()  # held here while the others line up

    def worker(n: int) -> None:
        with turns.turn() as turn:
            assert turn.held
            events.append(("in", n))
            time.sleep(0.002)  # long enough for a second holder to overlap
            events.append(("out", n))

    threads = []
    for n in range(4):
        threads.append(threading.Thread(target=worker, args=(n,)))
        threads[-1].start()
        wait_for_waiting(turns, n + 1)
    assert events == []  # nobody ran while the turn was held
    turns.give()
    for thread in threads:
        thread.join(WAIT_S)
    assert events == [(kind, n) for n in range(4) for kind in ("in", "out")]
    assert turns.waiting() == 0


def test_hand_over_lets_a_waiting_thread_run_first_then_takes_the_turn_back() -> None:
    turns = Turns(longest_s=WAIT_S)
    order: list[str] = []

    def waiter() -> None:
        with turns.turn():
            order.append("waiter")

    with turns.turn() as turn:
        assert not turn.hand_over()  # nobody waits: the holder keeps going
        thread = threading.Thread(target=waiter)
        thread.start()
        wait_for_waiting(turns, 1)
        assert turn.hand_over()
        assert turn.held
        order.append("holder")
        assert turns.waiting() == 0
    thread.join(WAIT_S)
    assert order == ["waiter", "holder"]
    assert turns.take()  # given back: free again


def test_past_the_longest_turn_the_others_go_ahead_without_one() -> None:
    """A holder stuck in I/O (a store that hangs) holds the others up for one turn at
    most; the line still works once it gives the turn back."""
    turns = Turns(longest_s=0.05)
    assert turns.take()
    started = time.monotonic()
    assert not turns.take()  # waited out the rest of the holder's turn
    assert 0.04 <= time.monotonic() - started < WAIT_S
    started = time.monotonic()
    with turns.turn() as turn:  # the holder is over time already: no wait at all
        assert not turn.held
    assert time.monotonic() - started < 0.04
    assert turns.waiting() == 0
    turns.give()  # the stuck holder comes back
    with turns.turn() as turn:  # the skipped tickets do not block the line
        assert turn.held
