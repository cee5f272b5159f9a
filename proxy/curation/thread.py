"""The worker's one curation thread, where big bodies are planned (`proxy.curation.plan`),
each job in its turn among the worker's background threads (`proxy.priority.Turns`); after
each it gives freed memory back (`proxy.heap`).

A job and its result travel in a box the loop empties: the pool's work item holds the
job, and its future the result, until the thread next gets the GIL and drops them, which
can be after the loop has gone on with the request (a stream begun, the body meant to be
freed). Through the box the work item holds only an empty list by then."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from typing import TypeVar, cast

from proxy.heap import HeapTrim
from proxy.priority import CURATION_STEPS, Turns, lower_thread_priority

T = TypeVar("T")


class CurationThread:
    """One thread that runs planning jobs in order, trimming the heap after them."""

    def __init__(self, turns: Turns | None = None) -> None:
        self.turns = turns or Turns()
        """Shared with the audit writer (`open_edge`); its own when not given."""
        self._pool = ThreadPoolExecutor(
            1,
            thread_name_prefix="curator-curate",
            initializer=partial(lower_thread_priority, CURATION_STEPS),
        )
        self.trim = HeapTrim()

    async def run(self, job: Callable[[], T]) -> T:
        return await in_thread(self._pool, partial(self._run, job))

    def _run(self, job: Callable[[], T]) -> T:
        try:
            with self.turns.turn():
                return job()
        finally:
            self.trim()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


async def in_thread(executor: Executor | None, job: Callable[[], T]) -> T:
    """`job()` in `executor` (asyncio's default one when None), through a box (above)."""
    box: list[object] = [job]
    await asyncio.get_running_loop().run_in_executor(executor, _unbox, box)
    return cast(T, box.pop())


def _unbox(box: list[object]) -> None:
    """Run the job `box` holds and leave its result there instead."""
    job = cast(Callable[[], object], box.pop())
    box.append(job())
