"""The benchmark cases. Each takes the running `Bench` and returns its table rows.

Targets (shown next to the figures): passthrough >= 0.8x floor req/s; a warm 127k-token
request curated to a 32k window <= +3 ms p50 over the floor; a cold one <= 1.2x the time
tiktoken alone needs to encode its text; streaming time to first byte <= +2 ms over the
floor; proxy RSS <= 150 MB while holding 500 slow streams.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import tiktoken

from bench import conversations, servers
from bench.loadgen import LoadResult, have_wrk, percentile, run_python, run_wrk
from bench.measure import Timed, sequential
from bench.procs import Placement, Processes
from bench.report import Row, ratio, skipped
from bench.salt import body_texts, with_nonce

SMALL_MODEL = "bench-small"
CHAT = "/v1/chat/completions"
LOADGEN_NICE = 5
PACED_CONNECTIONS = 8
"""Connections of a paced wrk run: few, each thinking between requests."""
AGENT_SMALL = "proxy coding-agent (nothing to cut)"
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


@dataclass(frozen=True, slots=True)
class Settings:
    """How long and how hard to measure (`--quick` shrinks all of it)."""

    quick: bool = False
    duration_s: float = 10.0
    connections: int = 32
    requests: int | None = None
    """Stop each load run after this many requests (the quick mode's bound)."""
    warm_reps: int = 200
    cold_reps: int = 20
    stream_reps: int = 100
    ratio_rounds: int = 3
    """Interleaved floor/proxy rounds of the passthrough ratio (quick mode: 1)."""
    streams: int = 500
    hold_s: float = 5.0
    load: str = "auto"
    """wrk | python | auto (wrk when installed)."""


@dataclass(frozen=True, slots=True)
class Bench:
    """The running servers (None with a reason when one is not there) and the settings."""

    settings: Settings
    workdir: Path
    upstreams: servers.Upstreams
    floor: str
    proxy: str | None
    proxy_reason: str
    litellm: str | None
    litellm_reason: str
    client: Placement
    proxy_pid: int | None = None
    floor_pid: int | None = None
    procs: Processes | None = None
    """To start the extra servers the audit and scale cases compare."""
    server: Placement = field(default_factory=Placement)
    """Where the servers under test run."""
    audit: str = "none"
    """The main proxy's audit sink."""

    def load(
        self,
        url: str,
        body: bytes,
        *,
        rate: float | None = None,
        client: Placement | None = None,
        duration_s: float | None = None,
    ) -> LoadResult:
        """Closed-loop load on `url`. At `rate` req/s when given: wrk with a think time
        per connection (`PACED_CONNECTIONS`), else the Python generator, open loop."""
        path = self.workdir / f"body-{len(body)}.json"
        path.write_bytes(body)
        s = self.settings
        # The generator shares its core with the upstream, the fixed reference: niced, it
        # yields to the upstream, so saturation shows as fewer requests sent rather than as
        # inflated upstream service times.
        placement = replace(client or self.client, nice=LOADGEN_NICE)
        duration = duration_s or s.duration_s
        wrk = s.load == "wrk" or (s.load == "auto" and have_wrk() and s.requests is None)
        if wrk:
            connections = s.connections if rate is None else PACED_CONNECTIONS
            # ~1 ms of latency at these rates; each connection's share of the rate sets
            # its think time.
            think = None if rate is None else max(0, round(connections * 1000 / rate) - 1)
            return run_wrk(
                url,
                path,
                connections=connections,
                duration_s=duration,
                placement=placement,
                think_ms=think,
            )
        return run_python(
            url,
            path,
            connections=s.connections,
            duration_s=duration,
            requests=None if rate else s.requests,
            placement=placement,
            rate=rate,
        )


def _load_row(case: str, path: str, result: LoadResult, floor: LoadResult | None) -> Row:
    note = f"{result.errors} errors" if result.errors else ""
    return Row(
        case,
        path,
        result.rps,
        result.p50_ms,
        result.p99_ms,
        vs_floor=ratio(result.rps, floor.rps if floor else None),
        note=note,
    )


def _interleaved(bench: Bench, proxy: str, body: bytes) -> tuple[LoadResult, LoadResult]:
    """Floor and proxy passthrough measured in alternating rounds; the round with the
    median ratio. One pair of runs moves by several percent with whatever else the
    machine does; alternating spreads that drift over both sides."""
    pairs = []
    for _ in range(max(1, bench.settings.ratio_rounds)):
        floor = bench.load(bench.floor + CHAT, body)
        pairs.append((floor, bench.load(proxy + CHAT, body)))
    pairs.sort(key=lambda pair: pair[1].rps / pair[0].rps if pair[0].rps else 0.0)
    return pairs[len(pairs) // 2]


def small(bench: Bench) -> list[Row]:
    """Small-body throughput: direct, floor, proxy passthrough, proxy curating, LiteLLM."""
    case = "small body, req/s"
    body = orjson.dumps(conversations.small_request(SMALL_MODEL))
    curated = orjson.dumps(conversations.small_request(servers.LARGE_MODEL))
    direct = bench.load(bench.upstreams.origin + CHAT, body)
    if bench.proxy is None:
        floor = bench.load(bench.floor + CHAT, body)
    else:
        floor, proxy = _interleaved(bench, bench.proxy, body)
    rows = [
        _load_row(case, f"direct upstream ({bench.upstreams.kind})", direct, floor),
        _load_row(case, "floor (starlette+aiohttp)", floor, floor),
    ]
    target = ">= 0.8x floor"
    if bench.proxy is None:
        rows.append(skipped(case, "proxy passthrough", bench.proxy_reason, target))
        rows.append(skipped(case, AGENT_SMALL, bench.proxy_reason))
    else:
        met = floor.rps > 0 and proxy.rps >= 0.8 * floor.rps
        figure = ratio(proxy.rps, floor.rps) + " floor"
        row = _load_row(case, "proxy passthrough", proxy, floor)
        rows.append(replace(row, figure=figure, target=target, met=met))
        rows.append(_load_row(case, AGENT_SMALL, bench.load(bench.proxy + CHAT, curated), floor))
    if bench.litellm is None:
        rows.append(skipped(case, "litellm proxy", bench.litellm_reason))
    else:
        rows.append(_load_row(case, "litellm proxy", bench.load(bench.litellm + CHAT, body), floor))
    return rows


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
        cold: list[Row] = []
        for path, model in LARGE_PATHS:
            request = conversations.large_request(model=model)
            tiktoken_row, cold_row = await _cold(bench, session, bench.proxy, path, request)
            cold = cold or [tiktoken_row]
            cold.append(cold_row)
    return rows + cold


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
