"""The audit and scale-out cases: each starts the extra servers it compares.

audit: the proxy in passthrough with no audit sink and one writing every exchange to SQLite
(the main proxy is one of them, by its `--audit`; a second proxy started here the other).
Flat out (closed loop), the audit's CPU shows as fewer requests per second, and as the
CPU time each server used per request (steadier than req/s here). Paced well
below saturation (40% of what the no-audit proxy managed flat out, at most 1,000/s: wrk
with 8 connections each thinking between requests, else the Python generator open loop),
p50 shows whether writing the audit log sits on the request path; five alternating
rounds, the median one reported. Target: p50 within 10%, read one-sided: at most 10%
above the unaudited p50 (an audited p50 below it is the noise
of the unaudited run, not a saving).

scale: the floor and the proxy with 1 and with 2 workers, nothing pinned (each worker may
use any core), flat out, with the CPU time each server used per request. Workers share
nothing on the request path, so throughput scales with the cores they are given exactly
when the CPU one request costs stays the same with more workers. Target: within 10%.
On 2 cores the load generator and upstream need a share too, so req/s itself cannot
double here; the floor's req/s with 2 workers shows what the cores allow.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace

import orjson

from bench import conversations, servers
from bench.cases import CHAT, SMALL_MODEL, Bench, load_with_cpu
from bench.loadgen import LoadResult
from bench.procs import Placement, StartError
from bench.report import Row, skipped

MAX_PACED_RATE = 1000.0
PACED_SHARE = 0.4
PACED_ROUNDS = 5
AUDIT_CASE = "audit off vs sqlite"
AUDIT_PATHS = (
    "flat out, audit off",
    "flat out, audit sqlite",
    "fixed rate, audit off",
    "fixed rate, audit sqlite",
)
SCALE_CASE = "scale-out, req/s"
SCALE_PATHS = (
    "floor, 1 worker",
    "floor, 2 workers",
    "proxy passthrough, 1 worker",
    "proxy passthrough, 2 workers",
)


def _skipped(case: str, paths: tuple[str, ...], reason: str, target: str) -> list[Row]:
    """Every row of the case, so the table always has the same lines; the target on the last."""
    return [skipped(case, p, reason, target if p == paths[-1] else "") for p in paths]


def audit(bench: Bench) -> list[Row]:
    target = "p50 at most +10%"
    if bench.proxy is None or bench.procs is None:
        return _skipped(AUDIT_CASE, AUDIT_PATHS, bench.proxy_reason, target)
    if bench.audit not in ("none", "sqlite"):
        reason = f"the main proxy audits to {bench.audit}; run with --audit sqlite or none"
        return _skipped(AUDIT_CASE, AUDIT_PATHS, reason, target)
    # The main proxy is one side; a second one, with the other setting, the other.
    other = "none" if bench.audit == "sqlite" else "sqlite"
    try:
        second = servers.start_proxy(
            bench.procs, bench.workdir, bench.upstreams, bench.server, other, name="audited"
        )
    except StartError as exc:
        return _skipped(AUDIT_CASE, AUDIT_PATHS, str(exc).splitlines()[0], target)
    unaudited, audited = (second, bench.proxy) if other == "none" else (bench.proxy, second)
    main_pid, second_pid = bench.proxy_pid or 0, bench.procs.pid("audited")
    off_pid, on_pid = (second_pid, main_pid) if other == "none" else (main_pid, second_pid)
    body = orjson.dumps(conversations.small_request(SMALL_MODEL))
    # CPU per request too: steadier than req/s on a machine whose speed wanders.
    off, off_us = load_with_cpu(bench, off_pid, unaudited + CHAT, body)
    on, on_us = load_with_cpu(bench, on_pid, audited + CHAT, body)
    rate = round(min(MAX_PACED_RATE, PACED_SHARE * off.rps))
    # Alternating rounds, the median one reported: one run's p50 at a fixed rate moves by
    # a tenth of a millisecond with whatever else the machine does.
    seconds = max(2.0, bench.settings.duration_s / 2)
    rounds = sorted(
        (
            (
                bench.load(unaudited + CHAT, body, rate=rate, duration_s=seconds),
                bench.load(audited + CHAT, body, rate=rate, duration_s=seconds),
            )
            for _ in range(1 if bench.settings.quick else PACED_ROUNDS)
        ),
        key=lambda pair: _change(*pair),
    )
    paced_off, paced_on = rounds[len(rounds) // 2]
    bench.procs.stop("audited")
    change = _change(paced_off, paced_on)
    spread = f" (rounds {_change(*rounds[0]):+.0%} to {_change(*rounds[-1]):+.0%})"
    flat = f"{on.rps / off.rps:.2f}x req/s; " if off.rps else ""
    flat += f"{on_us:.0f} us CPU/request ({on_us / off_us:.2f}x)" if off_us else ""
    return [
        Row(
            AUDIT_CASE,
            AUDIT_PATHS[0],
            off.rps,
            off.p50_ms,
            off.p99_ms,
            figure=f"{off_us:.0f} us CPU/request",
        ),
        Row(AUDIT_CASE, AUDIT_PATHS[1], on.rps, on.p50_ms, on.p99_ms, figure=flat),
        Row(
            AUDIT_CASE,
            AUDIT_PATHS[2],
            paced_off.rps,
            paced_off.p50_ms,
            paced_off.p99_ms,
            figure=f"{rate}/s",
        ),
        Row(
            AUDIT_CASE,
            AUDIT_PATHS[3],
            paced_on.rps,
            paced_on.p50_ms,
            paced_on.p99_ms,
            figure=f"{rate}/s: {change:+.0%} p50{spread if len(rounds) > 1 else ''}",
            target=target,
            met=change <= 0.10,
        ),
    ]


def _change(off: LoadResult, on: LoadResult) -> float:
    """The audited p50 relative to the unaudited one (+0.1: 10% slower)."""
    return on.p50_ms / off.p50_ms - 1 if off.p50_ms else float("nan")


def scale(bench: Bench) -> list[Row]:
    target = "CPU/request within 10% of 1 worker's"
    floor_pid, proxy_pid = bench.floor_pid, bench.proxy_pid
    if bench.proxy is None or bench.procs is None or proxy_pid is None or floor_pid is None:
        return _skipped(SCALE_CASE, SCALE_PATHS, bench.proxy_reason, target)
    if (os.cpu_count() or 1) < 2:
        return _skipped(SCALE_CASE, SCALE_PATHS, "one CPU: nothing to scale to", target)
    anywhere = Placement()
    procs, ups, work = bench.procs, bench.upstreams, bench.workdir
    try:
        floor2 = servers.start_floor(procs, ups, anywhere, name="floor-2w", workers=2)
        proxy2 = servers.start_proxy(
            procs, work, ups, anywhere, bench.audit, name="proxy-2w", workers=2
        )
    except StartError as exc:
        return _skipped(SCALE_CASE, SCALE_PATHS, str(exc).splitlines()[0], target)
    body = orjson.dumps(conversations.small_request(SMALL_MODEL))
    runs: dict[str, tuple[LoadResult, float]] = {}
    load_us: dict[str, float] = {}
    servers_under_test = (
        (bench.floor, floor_pid, True),
        (floor2, procs.pid("floor-2w"), False),
        (bench.proxy, proxy_pid, True),
        (proxy2, procs.pid("proxy-2w"), False),
    )
    for name, (url, pid, pinned) in zip(SCALE_PATHS, servers_under_test, strict=True):
        # One worker unpinned too, so both counts run under the same rules.
        with _unpinned(pid if pinned else None):
            generator = _children_cpu_s()
            result, server_us = load_with_cpu(bench, pid, url + CHAT, body, client=anywhere)
            generator = _children_cpu_s() - generator
        per = 1e6 / result.requests if result.requests else float("nan")
        runs[name], load_us[name] = (result, server_us), generator * per
    procs.stop("floor-2w")
    procs.stop("proxy-2w")
    rows = [
        Row(
            SCALE_CASE,
            name,
            r.rps,
            r.p50_ms,
            r.p99_ms,
            figure=f"{us:.0f} us CPU/request",
            note=f"load generator {load_us[name]:.0f} us CPU/request",
        )
        for name, (r, us) in runs.items()
    ]
    (f1, _), (f2, _), (p1, c1), (p2, c2) = (runs[name] for name in SCALE_PATHS)
    if f1.rps and p1.rps and c1:
        rows[1] = replace(rows[1], figure=f"{rows[1].figure}; {f2.rps / f1.rps:.2f}x req/s")
        rows[3] = replace(
            rows[3],
            figure=f"{rows[3].figure} ({c2 / c1:.2f}x); {p2.rps / p1.rps:.2f}x req/s",
            target=target,
            met=c2 <= 1.1 * c1,
        )
    return rows


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children: the load generator, once it is done
    (wrk or `bench.loadgen`, each run as a child and waited for)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@contextmanager
def _unpinned(pid: int | None) -> Iterator[None]:
    """Lets a pinned server's threads run on every CPU for a while, then pins them back."""
    saved: dict[int, set[int]] = {}
    every = set(range(os.cpu_count() or 1))
    for tid in _threads(pid) if pid is not None else ():
        with suppress(OSError):  # a thread that ended meanwhile
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, every)
    try:
        yield
    finally:
        for tid, cpus in saved.items():
            with suppress(OSError):
                os.sched_setaffinity(tid, cpus)


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]
