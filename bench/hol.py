"""Head-of-line blocking: small streaming turns while other agents send cold 127k-token bodies.

One process, one event loop: if a never-seen 127k-token body is tokenized and curated in a
way that holds the loop (or the GIL), every small turn of every other agent waits behind it.
The case measures the time to first byte of small streaming requests, one at a time, first
with nothing else going on, then while `SENDERS` clients each send cold large bodies (fresh
nonces, so no cache helps) back to back. It also reads the proxy's own loop-lag gauge
(`curator_event_loop_lag_max_seconds`) after the load.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

import aiohttp
import orjson

from bench import conversations, servers
from bench.cases import CHAT, Bench
from bench.loadgen import percentile
from bench.measure import JSON_HEADERS, timed_post
from bench.report import Row, skipped
from bench.salt import with_nonce

CASE = "stream TTFB under cold 127k load"
SENDERS = 2
TARGET_MS = 10.0
COLD_BODIES = 240
"""Never-seen large bodies made for the senders (more than they get through)."""
QUICK_COLD_BODIES = 16
GAP_S = 0.02
"""Pause between two measured small requests (they are not the load)."""
LAG_BUCKET = re.compile(rb'^curator_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', re.M)
STALL_S = 0.005


async def hol(bench: Bench) -> list[Row]:
    target = f"p99 <= idle + {TARGET_MS:g} ms"
    if bench.proxy is None:
        return [skipped(CASE, "proxy coding-agent", bench.proxy_reason, target)]
    proxy = bench.proxy
    small = orjson.dumps(conversations.small_request(servers.STREAM_MODEL) | {"stream": True})
    large = conversations.large_request(model=servers.LARGE_MODEL)
    reps = bench.settings.stream_reps
    timeout = aiohttp.ClientTimeout(total=120)
    # Made up front: salting a 127k-token body here would stall this process's own loop.
    run = f"{time.time_ns():x}"
    count = QUICK_COLD_BODIES if bench.settings.quick else COLD_BODIES
    cold = [orjson.dumps(with_nonce(large, f"{run}-{i}")) for i in range(count)]
    async with aiohttp.ClientSession(timeout=timeout) as session:
        idle = await _ttfbs(session, proxy + CHAT, small, reps)
        stop = asyncio.Event()
        sent = [0] * SENDERS
        senders = [
            asyncio.create_task(_send_cold(session, proxy + CHAT, cold[i::SENDERS], sent, i, stop))
            for i in range(SENDERS)
        ]
        await asyncio.sleep(0.5)  # the big bodies are flowing
        before = await _lag_buckets(session, proxy)
        loaded = await _ttfbs(session, proxy + CHAT, small, reps)
        after = await _lag_buckets(session, proxy)
        stop.set()
        for task in senders:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await task
    i50, i99 = percentile(idle, 50), percentile(idle, 99)
    l50, l99 = percentile(loaded, 50), percentile(loaded, 99)
    lag_note = _lag_note(before, after)
    return [
        Row(CASE, "proxy, idle", None, i50, i99),
        Row(
            CASE,
            f"proxy, {SENDERS} clients sending cold 127k bodies",
            None,
            l50,
            l99,
            figure=f"{l99 - i99:+.1f} ms p99",
            target=target,
            met=l99 - i99 <= TARGET_MS,
            note=f"{sum(sent)} large bodies curated meanwhile; event loop: {lag_note}",
        ),
    ]


async def _ttfbs(session: aiohttp.ClientSession, url: str, body: bytes, reps: int) -> list[float]:
    out: list[float] = []
    for _ in range(reps):
        timed = await timed_post(session, url, body)
        out.append(timed.first_byte_s * 1000)
        await asyncio.sleep(GAP_S)
    return out


async def _send_cold(
    session: aiohttp.ClientSession,
    url: str,
    bodies: list[bytes],
    sent: list[int],
    sender: int,
    stop: asyncio.Event,
) -> None:
    """Each body once (never seen before), back to back, until stopped or out of bodies."""
    for body in bodies:
        if stop.is_set():
            return
        async with session.post(url, data=body, headers=JSON_HEADERS) as resp:
            await resp.read()
        sent[sender] += 1


async def _lag_buckets(session: aiohttp.ClientSession, proxy: str) -> dict[float, float]:
    """The proxy's loop-lag histogram, cumulative counts by bucket bound (empty if none)."""
    try:
        async with session.get(proxy + "/metrics") as resp:
            text = await resp.read()
    except aiohttp.ClientError:
        return {}
    return {float(le): float(n) for le, n in LAG_BUCKET.findall(text)}


def _lag_note(before: dict[float, float], after: dict[float, float]) -> str:
    """How many of the loop's 10 ms ticks during the load came over `STALL_S` late, and
    the bucket the latest fell in."""
    if not after:
        return "lag metric n/a"
    delta = {le: after[le] - before.get(le, 0.0) for le in after}
    ticks = delta[max(delta)]
    on_time = delta.get(STALL_S, 0.0)
    worst = min((le for le, n in delta.items() if n == ticks), default=float("inf"))
    return (
        f"{ticks - on_time:.0f} of {ticks:.0f} ticks over {STALL_S * 1000:g} ms late, "
        f"worst <= {worst * 1000:g} ms"
    )
