"""The benchmark's shared pieces (`Settings`, the running `Bench`) and the small-body case.
Each case takes the running `Bench` and returns its table rows; the others live in modules
of their own (`large`, `latency`, `streams`, `hol`, `scaling`).

Targets (shown next to the figures): passthrough >= 0.8x floor req/s; streaming time to
first byte <= +2 ms over the floor; proxy RSS <= 150 MB while holding 500 slow streams; the
large case's in `bench.large`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import orjson

from bench import conversations, servers
from bench.loadgen import LoadResult, have_wrk, run_python, run_wrk
from bench.procs import Placement, Processes, tree_cpu_s
from bench.report import Row, ratio, skipped

SMALL_MODEL = "bench-small"
CHAT = "/v1/chat/completions"
LOADGEN_NICE = 5
PACED_CONNECTIONS = 8
"""Connections of a paced wrk run: few, each thinking between requests."""
PROXY_SMALL = (
    ("proxy passthrough", SMALL_MODEL, True),
    ("proxy default preset (nothing to cut)", servers.DEFAULT_MODEL, True),
    ("proxy coding-agent (nothing to cut)", servers.LARGE_MODEL, False),
)
"""The proxy's small-body rows: each path's name, the model that routes it, and whether
the target applies (to passthrough, and to the default preset: what a config-less
`curator serve` runs, so what a small request meets there)."""


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


class Measured(NamedTuple):
    """A load run and the server's CPU time per request meanwhile (us; nan: unknown)."""

    result: LoadResult
    cpu_us: float


def load_with_cpu(
    bench: Bench, pid: int | None, url: str, body: bytes, *, client: Placement | None = None
) -> Measured:
    """Flat-out load on `url`, and the CPU time per request of the server `pid` (its
    threads and any processes it started; nan without a pid or requests)."""
    before = tree_cpu_s(pid) if pid is not None else 0.0
    result = bench.load(url, body, client=client)
    if pid is None or not result.requests:
        return Measured(result, float("nan"))
    return Measured(result, (tree_cpu_s(pid) - before) * 1e6 / result.requests)


def _rotated(
    bench: Bench, paths: Sequence[tuple[str, bytes]]
) -> list[tuple[Measured, Measured, list[float]]]:
    """The floor and each proxy path, measured in turn, round after round; for each path
    the round with its median ratio to that round's floor (with every round's ratio, the
    spread). One pair of runs moves by several percent with whatever else the machine
    does; rotating spreads that drift over every side."""
    rounds = []
    for _ in range(max(1, bench.settings.ratio_rounds)):
        floor = load_with_cpu(bench, bench.floor_pid, bench.floor + CHAT, paths[0][1])
        runs = [load_with_cpu(bench, bench.proxy_pid, url + CHAT, body) for url, body in paths]
        rounds.append((floor, runs))
    picked = []
    for k in range(len(paths)):
        pairs = sorted(((f, runs[k]) for f, runs in rounds), key=lambda fp: _share(*fp))
        ratios = [_share(f, runs[k]) for f, runs in rounds]
        picked.append((*pairs[len(pairs) // 2], ratios))
    return picked


def _share(floor: Measured, proxy: Measured) -> float:
    return proxy.result.rps / floor.result.rps if floor.result.rps else 0.0


def _cpu_note(proxy: Measured, floor: Measured) -> str:
    if math.isnan(proxy.cpu_us) or math.isnan(floor.cpu_us):
        return ""
    return f"; {proxy.cpu_us:,.0f} us CPU/request ({proxy.cpu_us / floor.cpu_us:.2f}x the floor's)"


def small(bench: Bench) -> list[Row]:
    """Small-body throughput: direct, floor, the proxy in passthrough, with the default
    preset (what `curator serve` runs with no config file) and with the coding-agent
    preset (nothing to cut in either), and LiteLLM. The server's CPU time per request is
    the steadier figure: pinned to its core and saturated, its req/s is about the inverse,
    while the load generator's core (shared with the upstream) moves req/s around."""
    case = "small body, req/s"
    body = orjson.dumps(conversations.small_request(SMALL_MODEL))
    direct = bench.load(bench.upstreams.origin + CHAT, body)
    target = ">= 0.8x floor"
    if bench.proxy is None:
        floor = load_with_cpu(bench, bench.floor_pid, bench.floor + CHAT, body)
        rows = _small_rows(case, bench, direct, floor)
        rows += [
            skipped(case, path, bench.proxy_reason, target if aimed else "")
            for path, _, aimed in PROXY_SMALL
        ]
    else:
        paths = [
            (bench.proxy, orjson.dumps(conversations.small_request(m))) for _, m, _ in PROXY_SMALL
        ]
        picked = _rotated(bench, paths)
        floor = picked[0][0]  # the passthrough row's round
        rows = _small_rows(case, bench, direct, floor)
        for (path, _, aimed), (round_floor, proxy, ratios) in zip(PROXY_SMALL, picked, strict=True):
            row = _load_row(case, path, proxy.result, round_floor.result)
            spread = ", ".join(f"{r:.2f}x" for r in ratios)
            note = f"rounds: {spread}{_cpu_note(proxy, round_floor)}"
            row = replace(row, note=note + (f"; {row.note}" if row.note else ""))
            if aimed:
                rps, floor_rps = proxy.result.rps, round_floor.result.rps
                met = floor_rps > 0 and rps >= 0.8 * floor_rps
                row = replace(row, figure=row.vs_floor + " floor", target=target, met=met)
            rows.append(row)
    if bench.litellm is None:
        rows.append(skipped(case, "litellm proxy", bench.litellm_reason))
    else:
        litellm = bench.load(bench.litellm + CHAT, body)
        rows.append(_load_row(case, "litellm proxy", litellm, floor.result))
    return rows


def _small_rows(case: str, bench: Bench, direct: LoadResult, floor: Measured) -> list[Row]:
    row = _load_row(case, "floor (starlette+aiohttp)", floor.result, floor.result)
    if not math.isnan(floor.cpu_us):
        row = replace(row, note=f"{floor.cpu_us:,.0f} us CPU/request")
    return [_load_row(case, f"direct upstream ({bench.upstreams.kind})", direct, floor.result), row]
