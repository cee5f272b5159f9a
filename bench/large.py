"""The large case: a 127k-token agent request to a 32k-window model, warm and cold.

Warm: the same body again and again, the floor's requests and each proxy path's
interleaved in rounds; the figure is the proxy's p50 minus the floor's. Cold: every message
salted with a fresh nonce, so no cache helps; compared with tiktoken alone encoding the
same text. Targets: warm <= +3 ms, cold <= 1.2x tiktoken.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson
import tiktoken

from bench import conversations, servers
from bench.cases import CHAT, Bench
from bench.loadgen import percentile
from bench.measure import Timed, sequential
from bench.report import Row, ratio, skipped
from bench.salt import body_texts, with_nonce

TIKTOKEN_PATH = "tiktoken alone (in-process)"
WARM_CASE, COLD_CASE = "large 127k -> 32k, warm", "large 127k -> 32k, cold"
WARM_TARGET, COLD_TARGET = "<= +3 ms", "<= 1.2x"
FIRST = "first sight"
WARM_ROUNDS = 10
"""Rounds the warm requests to the floor and each proxy path are interleaved in."""
LARGE_PATHS = (
    ("proxy coding-agent", servers.LARGE_MODEL),
    ("proxy default preset", servers.DEFAULT_MODEL),
)
"""The large case's proxy rows: the bench's agent preset, and what `curator serve` runs
with no config file."""


async def large(bench: Bench) -> list[Row]:
    """The 127k-token request to a 32k-window model, warm (repeated) and cold (never seen),
    curated by each of `LARGE_PATHS`. One tiktoken row: the first path's bodies."""
    targets = {"floor": (bench.floor, servers.LARGE_MODEL)}
    if bench.proxy is not None:
        targets |= {path: (bench.proxy, model) for path, model in LARGE_PATHS}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        warm = await _warm_rounds(session, targets, bench.settings.warm_reps)
        floor_ms = [t.total_s * 1000 for t in warm["floor"]]
        f50 = percentile(floor_ms, 50)
        rows = [Row(WARM_CASE, "floor", None, f50, percentile(floor_ms, 99))]
        if bench.proxy is None:
            reason = bench.proxy_reason
            return [
                *rows,
                *(skipped(WARM_CASE, path, reason, WARM_TARGET) for path, _ in LARGE_PATHS),
                skipped(COLD_CASE, TIKTOKEN_PATH, reason),
                *(skipped(COLD_CASE, f"{p}, {FIRST}", reason, COLD_TARGET) for p, _ in LARGE_PATHS),
            ]
        rows += [_warm_row(path, warm[path], f50) for path, _ in LARGE_PATHS]
        cold = [
            await _cold(bench, session, bench.proxy, path, conversations.large_request(model=m))
            for path, m in LARGE_PATHS
        ]
    return [*rows, cold[0][0], *(proxy_row for _, proxy_row in cold)]


async def _warm_rounds(
    session: aiohttp.ClientSession, targets: Mapping[str, tuple[str, str]], reps: int
) -> dict[str, list[Timed]]:
    """About `reps` timed requests of the large body to each target (origin, model),
    interleaved in `WARM_ROUNDS` rounds so that each sees the same moments of the machine;
    each round's first request to a target is not timed."""
    each = max(1, reps // WARM_ROUNDS)
    bodies = {
        path: orjson.dumps(conversations.large_request(model=m)) for path, (_, m) in targets.items()
    }
    out: dict[str, list[Timed]] = {path: [] for path in targets}
    for _ in range(WARM_ROUNDS):
        for path, (origin, _) in targets.items():
            out[path] += await sequential(session, origin + CHAT, [bodies[path]] * (each + 1), 1)
    return out


def _warm_row(path: str, warm: list[Timed], f50: float) -> Row:
    warm_ms = [t.total_s * 1000 for t in warm]
    p50 = percentile(warm_ms, 50)
    note, curated = curation_note(warm[-1].headers)
    return Row(
        WARM_CASE,
        path,
        None,
        p50,
        percentile(warm_ms, 99),
        vs_floor=ratio(p50, f50),
        figure=f"{p50 - f50:+.2f} ms p50",
        target=WARM_TARGET,
        met=curated and p50 - f50 <= 3.0,
        note=note,
    )


def curation_note(headers: Mapping[str, str]) -> tuple[str, bool]:
    """What the proxy's `x-curator-*` headers say it did, and whether it curated at all."""
    skipped_reason = headers.get("x-curator-skipped")
    if skipped_reason:
        return f"proxy skipped curation: {skipped_reason}", False
    before, after = headers.get("x-curator-tokens-before"), headers.get("x-curator-tokens-after")
    if before and after and before != after:
        return f"tokens {before} -> {after}", True
    return "proxy did not curate", False


async def _cold(
    bench: Bench, session: aiohttp.ClientSession, proxy: str, path: str, request: dict[str, Any]
) -> tuple[Row, Row]:
    """tiktoken alone on each never-seen body's text, and the proxy curating the body."""
    enc = tiktoken.get_encoding("o200k_base")
    run = f"{time.time_ns():x}"
    proxy_ms: list[float] = []
    tiktoken_ms: list[float] = []
    notes: set[tuple[str, bool]] = set()
    for k in range(bench.settings.cold_reps):
        salted = with_nonce(request, f"{run}-{k}")
        texts = body_texts(salted)
        t0 = time.perf_counter()
        for text in texts:
            enc.encode_ordinary(text)
        tiktoken_ms.append((time.perf_counter() - t0) * 1000)
        (timed,) = await sequential(session, proxy + CHAT, [orjson.dumps(salted)])
        proxy_ms.append(timed.total_s * 1000)
        notes.add(curation_note(timed.headers))
    t50, p50 = percentile(tiktoken_ms, 50), percentile(proxy_ms, 50)
    curated = all(ok for _, ok in notes)
    note = "; ".join(sorted(text for text, ok in notes if not ok))
    return (
        Row(COLD_CASE, TIKTOKEN_PATH, None, t50, percentile(tiktoken_ms, 99)),
        Row(
            COLD_CASE,
            f"{path}, {FIRST}",
            None,
            p50,
            percentile(proxy_ms, 99),
            figure=f"{p50 / t50:.2f}x tiktoken",
            target=COLD_TARGET,
            met=curated and p50 <= 1.2 * t50,
            note=note,
        ),
    )
