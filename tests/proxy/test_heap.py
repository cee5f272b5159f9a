from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from proxy.curation.thread import CurationThread
from proxy.heap import HeapTrim


def wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class Recorded(HeapTrim):
    """A HeapTrim whose malloc_trim is recorded: when, and in which thread."""

    def __init__(self, interval_s: float) -> None:
        super().__init__(interval_s=interval_s)
        self.calls: list[tuple[float, str]] = []
        self._trim = lambda _pad: (
            self.calls.append((time.monotonic(), threading.current_thread().name)) or 0
        )


def test_this_machine_has_malloc_trim() -> None:
    assert HeapTrim()._trim is not None, "this machine's libc has malloc_trim"


def test_a_first_request_trims_at_once_in_a_thread_of_its_own() -> None:
    trim = Recorded(interval_s=3600)
    trim()
    wait_for(lambda: trim.count == 1)
    assert [name for _, name in trim.calls] == ["curator-heap-trim"]


def test_requests_within_the_interval_make_one_more_trim_when_it_ends() -> None:
    trim = Recorded(interval_s=0.3)
    started = time.monotonic()
    trim()
    wait_for(lambda: trim.count == 1)
    for _ in range(5):  # a burst: the last of it is given back too, once
        trim()
    wait_for(lambda: trim.count == 2)
    time.sleep(0.4)
    assert trim.count == 2
    (first, _), (second, _) = trim.calls
    assert first - started < 0.25
    assert second - first >= 0.3


def test_no_trim_is_asked_again_without_new_work() -> None:
    trim = Recorded(interval_s=0.05)
    trim()
    wait_for(lambda: trim.count == 1)
    time.sleep(0.2)
    assert trim.count == 1


def test_close_cancels_a_trim_not_yet_due() -> None:
    trim = Recorded(interval_s=3600)
    trim()
    wait_for(lambda: trim.count == 1)
    trim()  # due in an hour
    trim.close()
    assert trim._due is None
    assert trim.count == 1


def test_the_curation_thread_runs_jobs_in_its_one_thread_and_trims_after() -> None:
    thread = CurationThread()
    names: list[str] = []

    async def run() -> list[int]:
        def job(n: int) -> int:
            names.append(threading.current_thread().name)
            return n * 2

        return [await thread.run(lambda n=n: job(n)) for n in range(3)]

    assert asyncio.run(run()) == [0, 2, 4]
    assert set(names) == {"curator-curate_0"}
    wait_for(lambda: thread.trim.count == 1)  # three jobs within a second: one trim now
    assert thread.trim._due is not None  # and one when the second ends
    thread.close()
    assert thread.trim._due is None
