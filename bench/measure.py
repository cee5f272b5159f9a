"""In-process client measurements: sequential latencies, time to first byte, held streams.

These run one request at a time (or hold many idle streams), so the orchestrator's own
event loop is not the bottleneck; throughput runs use `bench.loadgen` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp

JSON_HEADERS = {"content-type": "application/json"}


class BadResponse(RuntimeError):
    """A measured request did not answer 200."""


@dataclass(frozen=True, slots=True)
class Timed:
    """One request: total seconds, seconds to the first body byte, and response headers."""

    total_s: float
    first_byte_s: float
    headers: Mapping[str, str]


async def timed_post(session: aiohttp.ClientSession, url: str, body: bytes) -> Timed:
    """POST and read the whole answer, noting when its first body byte arrived."""
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers=JSON_HEADERS) as resp:
        first = await resp.content.readany()
        t_first = time.perf_counter()
        rest = await resp.read() if first else b""
        t_end = time.perf_counter()
        if resp.status != 200:
            text = (first + rest)[:300].decode(errors="replace")
            raise BadResponse(f"{url} answered {resp.status}: {text}")
        return Timed(t_end - t0, t_first - t0, dict(resp.headers))


async def sequential(
    session: aiohttp.ClientSession, url: str, bodies: list[bytes], warmup: int = 0
) -> list[Timed]:
    """Send each body in turn; the first `warmup` results are dropped."""
    out = [await timed_post(session, url, body) for body in bodies]
    return out[warmup:]


async def hold_streams(
    url: str,
    body: bytes,
    count: int,
    *,
    hold_s: float,
    open_timeout_s: float,
    sample: Callable[[], int],
) -> tuple[int, int]:
    """Open `count` streams, wait until each has its first byte, then keep them open for
    `hold_s` while calling `sample()` (a memory probe). Returns (open streams, peak sample).
    """
    started = asyncio.Event()
    opened = 0

    async def one(session: aiohttp.ClientSession) -> None:
        nonlocal opened
        async with session.post(url, data=body, headers=JSON_HEADERS) as resp:
            if resp.status != 200 or not await resp.content.readany():
                return
            opened += 1
            if opened == count:
                started.set()
            while await resp.content.readany():
                pass

    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = [asyncio.create_task(one(session)) for _ in range(count)]
        try:
            # On timeout, report how many did open; the caller flags a shortfall.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(started.wait(), open_timeout_s)
            peak = sample()
            deadline = time.monotonic() + hold_s
            while time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                peak = max(peak, sample())
            return opened, peak
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
