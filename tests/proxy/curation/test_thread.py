"""curation/thread.py: jobs submitted together run one at a time in submission order while the
loop stays free, a failing job still trims and raises to its caller, and closing drops what
is queued without waiting for what runs; a job waits for its turn among the worker's
background threads; once the caller has a job's result the thread holds neither the job
nor the result. (Results, the one thread's name and the trim's interval are in
tests/proxy/test_heap.py.)"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from proxy.curation.thread import CurationThread, in_thread
from proxy.priority import CURATION_STEPS, MAX_NICE, Turns

WAIT_S = 10.0


class CountingTrim:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


@pytest.fixture
def offload() -> Iterator[CurationThread]:
    thread = CurationThread()
    thread.trim = CountingTrim()  # type: ignore[assignment]  # every call, not once a second
    yield thread
    thread.close()


def test_jobs_submitted_together_run_one_at_a_time_in_order(offload: CurationThread) -> None:
    running = 0
    overlaps: list[int] = []
    order: list[int] = []

    def job(n: int) -> Callable[[], int]:
        def work() -> int:
            nonlocal running
            running += 1
            overlaps.append(running)
            threading.Event().wait(0.005)  # long enough for a second thread to overlap
            order.append(n)
            running -= 1
            return n

        return work

    async def all_at_once() -> list[int]:
        return await asyncio.gather(*(offload.run(job(n)) for n in range(8)))

    assert asyncio.run(all_at_once()) == list(range(8))
    assert order == list(range(8))
    assert set(overlaps) == {1}
    assert offload.trim.calls == 8  # type: ignore[attr-defined]


def test_the_loop_keeps_running_while_a_job_does(offload: CurationThread) -> None:
    release = threading.Event()

    def blocking() -> str:
        release.wait(WAIT_S)
        return "done"

    async def meanwhile() -> tuple[str, int]:
        job = asyncio.ensure_future(offload.run(blocking))
        ticks = 0
        while ticks < 3:  # the loop turns while the job blocks its thread
            await asyncio.sleep(0)
            ticks += 1
        assert not job.done()
        release.set()
        return await job, ticks

    assert asyncio.run(meanwhile()) == ("done", 3)


def test_a_failing_job_raises_to_its_caller_and_still_trims(offload: CurationThread) -> None:
    def broken() -> int:
        raise ValueError("planning failed")

    async def run_both() -> int:
        with pytest.raises(ValueError, match="planning failed"):
            await offload.run(broken)
        return await offload.run(lambda: 7)  # the thread survives its job's failure

    assert asyncio.run(run_both()) == 7
    assert offload.trim.calls == 2  # type: ignore[attr-defined]


def test_close_drops_queued_jobs_without_waiting_for_the_running_one(
    offload: CurationThread,
) -> None:
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def first() -> None:
        started.set()
        release.wait(WAIT_S)
        ran.append("first")

    async def scenario() -> None:
        running = asyncio.ensure_future(offload.run(first))
        queued = asyncio.ensure_future(offload.run(lambda: ran.append("queued")))
        await asyncio.to_thread(started.wait, WAIT_S)
        offload.close()  # returns at once: `first` is still blocked
        assert ran == []
        with pytest.raises(RuntimeError):  # nothing new after close
            await offload.run(lambda: ran.append("late"))
        release.set()
        await running
        with pytest.raises(asyncio.CancelledError):
            await queued

    asyncio.run(scenario())
    assert ran == ["first"]


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")
def test_jobs_run_below_the_event_loop_priority(offload: CurationThread) -> None:
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    loop_nice = nice()
    assert asyncio.run(offload.run(nice)) == min(MAX_NICE, loop_nice + CURATION_STEPS)
    assert nice() == loop_nice


def test_a_job_waits_while_another_background_thread_has_the_turn() -> None:
    turns = Turns(longest_s=WAIT_S)
    offload = CurationThread(turns)
    ran = threading.Event()

    async def scenario() -> str:
        turns.take()  # the audit writer, building a record
        job = asyncio.ensure_future(offload.run(lambda: ran.set() or "planned"))
        await asyncio.sleep(0.05)
        assert not ran.is_set()
        assert turns.waiting() == 1
        turns.give()
        return await job

    try:
        assert asyncio.run(scenario()) == "planned"
    finally:
        offload.close()


class _Big:
    """A job's result, weakly referenced to see when it is freed."""


@pytest.mark.parametrize("where", ["curation thread", "default executor"])
def test_once_the_caller_has_the_result_the_thread_holds_neither_job_nor_result(
    offload: CurationThread, where: str
) -> None:
    """A pool's thread drops its work item (the job, the future and its result) only when
    it next runs; here it is held up right after handing the result over, as a busy loop
    holding the GIL would hold it, and still nothing of the exchange stays alive. Both
    ways `plan` sends a big body to a thread."""
    let_go = threading.Event()
    held: list[weakref.ref[object]] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        hand_over = loop.call_soon_threadsafe

        def slow_thread(*args: Any) -> Any:
            handle = hand_over(*args)
            if threading.current_thread() is not threading.main_thread():
                let_go.wait(WAIT_S)  # the work item is still alive in the pool's thread
            return handle

        loop.call_soon_threadsafe = slow_thread  # type: ignore[method-assign, assignment]
        payload = _Big()
        job = lambda held=payload: held  # noqa: E731 - what the work item holds
        held.extend((weakref.ref(payload), weakref.ref(job)))
        del payload
        run = offload.run if where == "curation thread" else partial(in_thread, None)
        result = await run(job)
        assert isinstance(result, _Big)
        del job, result
        alive = [ref() is not None for ref in held]
        let_go.set()
        assert alive == [False, False]

    asyncio.run(scenario())
