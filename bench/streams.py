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
BIG_STREAMS = 50
"""Streams of the 127k-token request the memory case holds after the small ones (a
tenth as many in the quick mode)."""


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
    """Peak RSS of the floor and of the proxy while each holds N slow (trickling) small
    streams; then while each holds `BIG_STREAMS` of the 127k-token agent request (what an
    agent's turn holds: the floor its bytes, the proxy its parsed body for the audit)."""
    s = bench.settings
    small = orjson.dumps(conversations.small_request(servers.TRICKLE_MODEL) | {"stream": True})
    large = conversations.large_request(model=servers.TRICKLE_MODEL) | {"stream": True}
    big = max(1, min(BIG_STREAMS, s.streams // 10))
    rows = await _memory_rows(bench, f"memory, {s.streams} slow streams", small, s.streams, True)
    case = f"memory, {big} slow 127k-token streams"
    return rows + await _memory_rows(bench, case, orjson.dumps(large), big, False)


async def _memory_rows(
    bench: Bench, case: str, body: bytes, count: int, targeted: bool
) -> list[Row]:
    rows = []
    floor_mb = None
    if bench.floor_pid is not None:
        floor_mb, row = await _held(
            bench, case, "floor", bench.floor + "/trickle" + CHAT, body, bench.floor_pid, count
        )
        rows.append(row)
    target = f"<= {RSS_TARGET_MB:g} MB" if targeted else ""
    if bench.proxy is None or bench.proxy_pid is None:
        return [*rows, skipped(case, "proxy coding-agent", bench.proxy_reason, target)]
    mb, row = await _held(
        bench, case, "proxy coding-agent", bench.proxy + CHAT, body, bench.proxy_pid, count
    )
    return [
        *rows,
        Row(
            row.case,
            row.path,
            vs_floor=ratio(mb, floor_mb),
            figure=row.figure,
            target=target,
            met=(mb <= RSS_TARGET_MB and not row.note.startswith("only")) if targeted else None,
            note=row.note,
        ),
    ]


async def _held(
    bench: Bench, case: str, path: str, url: str, body: bytes, pid: int, count: int
) -> tuple[float, Row]:
    s = bench.settings
    idle = tree_rss(pid) / MB
    opened, peak = await hold_streams(
        url, body, count, hold_s=s.hold_s, open_timeout_s=30.0, sample=partial(tree_rss, pid)
    )
    mb = peak / MB
    figure = f"{mb:.0f} MB RSS, {(mb - idle) * 1024 / max(opened, 1):.0f} KB a stream over idle"
    note = f"idle {idle:.0f} MB"
    if opened < count:
        note = f"only {opened} of {count} streams opened; {note}"
    return mb, Row(case, path, figure=figure, note=note)
