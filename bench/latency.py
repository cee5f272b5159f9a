"""Added latency at concurrency 1: small requests one at a time, directly, through the floor
and through the proxy (the default config: passthrough, SQLite audit), many of them.

Peers' gateway benchmarks report the p99 a gateway adds at concurrency 1 (the best, in Rust
or Go, ~0.75-0.9 ms; a Python one ~10 ms). The added figure is the proxy's percentile minus
the direct one's, from the same run, requests interleaved round by round so that both see
the same machine.
"""

from __future__ import annotations

import aiohttp
import orjson

from bench import conversations
from bench.cases import CHAT, SMALL_MODEL, Bench
from bench.loadgen import percentile
from bench.measure import sequential
from bench.report import Row, skipped

CASE = "small body, concurrency 1"
TARGET_MS = 1.0
ROUNDS = 10


async def c1(bench: Bench) -> list[Row]:
    target = f"p99 <= direct + {TARGET_MS:g} ms"
    body = orjson.dumps(conversations.small_request(SMALL_MODEL))
    each = max(2, bench.settings.stream_reps * 3 // ROUNDS)
    paths = {"direct upstream": bench.upstreams.origin, "floor": bench.floor}
    if bench.proxy is not None:
        paths["proxy passthrough"] = bench.proxy
    times: dict[str, list[float]] = {name: [] for name in paths}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for _ in range(ROUNDS):  # interleaved: each path sees the same moments of the machine
            for name, origin in paths.items():
                timed = await sequential(session, origin + CHAT, [body] * (each + 1), 1)
                times[name] += [t.total_s * 1000 for t in timed]
    d50, d99 = percentile(times["direct upstream"], 50), percentile(times["direct upstream"], 99)
    rows = [
        Row(CASE, name, None, percentile(ms, 50), percentile(ms, 99))
        for name, ms in times.items()
        if name != "proxy passthrough"
    ]
    if bench.proxy is None:
        return [*rows, skipped(CASE, "proxy passthrough", bench.proxy_reason, target)]
    ms = times["proxy passthrough"]
    p50, p99 = percentile(ms, 50), percentile(ms, 99)
    return [
        *rows,
        Row(
            CASE,
            "proxy passthrough",
            None,
            p50,
            p99,
            figure=f"+{p50 - d50:.2f} ms p50, +{p99 - d99:.2f} ms p99 over direct",
            target=target,
            met=p99 - d99 <= TARGET_MS,
            note=f"{len(ms)} requests each, interleaved in {ROUNDS} rounds",
        ),
    ]
