"""Streaming cases: time to first byte of an SSE answer, and memory under many slow streams."""

from __future__ import annotations

from functools import partial

import aiohttp
import orjson

from bench import conversations, servers
from bench.cases import CHAT, Bench
from bench.loadgen import percentile
from bench.measure import Timed, hold_streams, sequential
from bench.procs import tree_rss
from bench.report import Row, ratio, skipped

MB = 1024 * 1024
TTFB_TARGET_MS = 2.0
RSS_TARGET_MB = 150.0


async def stream(bench: Bench) -> list[Row]:
    """TTFB of an SSE answer whose upstream sends one event at once, the rest after gaps."""
    case = "stream, time to first byte"
    body = orjson.dumps(conversations.small_request(servers.STREAM_MODEL) | {"stream": True})
    reps = bench.settings.stream_reps
    origin = bench.upstreams.stream_origin
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        direct = await sequential(session, origin + "/sse" + CHAT, [body] * (reps + 2), 2)
        floor = await sequential(session, bench.floor + "/sse" + CHAT, [body] * (reps + 2), 2)
        proxy = None
        if bench.proxy is not None:
            proxy = await sequential(session, bench.proxy + CHAT, [body] * (reps + 2), 2)
    rows = [_ttfb_row(case, "direct upstream (builtin)", direct), _ttfb_row(case, "floor", floor)]
    target = f"<= +{TTFB_TARGET_MS:g} ms"
    if proxy is None:
        return [*rows, skipped(case, "proxy coding-agent", bench.proxy_reason, target)]
    f50 = rows[1].p50_ms or 0.0
    row = _ttfb_row(case, "proxy coding-agent", proxy)
    p50 = row.p50_ms or 0.0
    # A proxy that buffered the stream would show the upstream's gaps in its first byte.
    gaps = max(t.total_s - t.first_byte_s for t in proxy) * 1000
    return [
        *rows,
        Row(
            row.case,
            row.path,
            None,
            row.p50_ms,
            row.p99_ms,
            ratio(p50, f50),
            f"{p50 - f50:+.2f} ms p50",
            target,
            p50 - f50 <= TTFB_TARGET_MS,
            f"rest of stream up to {gaps:.0f} ms later",
        ),
    ]


def _ttfb_row(case: str, path: str, timed: list[Timed]) -> Row:
    ms = [t.first_byte_s * 1000 for t in timed]
    return Row(case, path, None, percentile(ms, 50), percentile(ms, 99))


async def memory(bench: Bench) -> list[Row]:
    """Peak RSS of the floor and of the proxy while each holds N slow (trickling) streams."""
    s = bench.settings
    case = f"memory, {s.streams} slow streams"
    body = orjson.dumps(conversations.small_request(servers.TRICKLE_MODEL) | {"stream": True})
    rows = []
    floor_mb = None
    if bench.floor_pid is not None:
        floor_mb, row = await _held(
            bench, case, "floor", bench.floor + "/trickle" + CHAT, body, bench.floor_pid
        )
        rows.append(row)
    target = f"<= {RSS_TARGET_MB:g} MB"
    if bench.proxy is None or bench.proxy_pid is None:
        return [*rows, skipped(case, "proxy coding-agent", bench.proxy_reason, target)]
    mb, row = await _held(
        bench, case, "proxy coding-agent", bench.proxy + CHAT, body, bench.proxy_pid
    )
    return [
        *rows,
        Row(
            row.case,
            row.path,
            vs_floor=ratio(mb, floor_mb),
            figure=f"{mb:.0f} MB RSS",
            target=target,
            met=mb <= RSS_TARGET_MB and not row.note.startswith("only"),
            note=row.note,
        ),
    ]


async def _held(
    bench: Bench, case: str, path: str, url: str, body: bytes, pid: int
) -> tuple[float, Row]:
    s = bench.settings
    idle = tree_rss(pid) / MB
    opened, peak = await hold_streams(
        url, body, s.streams, hold_s=s.hold_s, open_timeout_s=30.0, sample=partial(tree_rss, pid)
    )
    mb = peak / MB
    note = f"idle {idle:.0f} MB"
    if opened < s.streams:
        note = f"only {opened} of {s.streams} streams opened; {note}"
    return mb, Row(case, path, figure=f"{mb:.0f} MB RSS", note=note)
