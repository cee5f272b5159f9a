from __future__ import annotations

import asyncio
import threading
import time

from proxy.curation.thread import CurationThread
from proxy.heap import HeapTrim


def test_trims_at_most_once_per_interval() -> None:
    trim = HeapTrim(interval_s=3600)
    trim()
    trim()
    assert trim.count == (1 if trim._trim is not None else 0)  # glibc here; elsewhere none
    assert HeapTrim(interval_s=0)._trim is not None, "this machine's libc has malloc_trim"


def test_a_call_too_soon_is_made_once_the_interval_is_up() -> None:
    """The last job of a burst frees memory too: it goes back a moment later, not at the
    next burst (which may never come)."""
    trim = HeapTrim(interval_s=0.05)
    for _ in range(5):
        trim()
    assert trim.count == 1
    deadline = time.monotonic() + 10
    while trim.count < 2:
        assert time.monotonic() < deadline, "the trim that came too soon was never made"
        time.sleep(0.01)
    time.sleep(0.15)
    assert trim.count == 2  # one made later for all four, no more


def test_the_curation_thread_runs_jobs_in_its_one_thread_and_trims_after() -> None:
    thread = CurationThread()
    names: list[str] = []

    async def run() -> list[int]:
        def job(n: int) -> int:
            names.append(threading.current_thread().name)
            return n * 2

        return [await thread.run(lambda n=n: job(n)) for n in range(3)]

    assert asyncio.run(run()) == [0, 2, 4]
    thread.close()
    assert set(names) == {"curator-curate_0"}
    assert thread.trim.count == 1  # three jobs within a second: one trim
