"""The worker's one curation thread, where big bodies are planned (`proxy.curation.plan`),
each job in its turn among the worker's background threads (`proxy.priority.Turns`); after
each it gives freed memory back (`proxy.heap`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

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
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._run, job)

    def _run(self, job: Callable[[], T]) -> T:
        try:
            with self.turns.turn():
                return job()
        finally:
            self.trim()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
