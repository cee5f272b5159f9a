"""HTTP load: closed-loop with wrk when installed, else a built-in aiohttp generator; and
paced load: wrk with a think time per connection, or the built-in generator open-loop at a
fixed rate.

Closed loop: N keep-alive connections each send their next POST as soon as the previous
answer is read, so the server runs flat out; req/s, p50 and p99 come back. Fixed rate
(`--rate R`): a request starts every 1/R seconds on schedule, whatever came back, over at
most N connections, and each latency counts from its scheduled start, so a server that
falls behind shows it (no coordinated omission). That measures what one request costs at
a given load rather than at saturation. The Python generator runs as its own process
(`python -m bench.loadgen ...`, JSON on stdout) so it can be pinned and niced apart from
the orchestrator.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp

from bench.procs import Placement, python_env

WRK_MARK = "BENCH_JSON "
WRK_SCRIPT = """
local f = assert(io.open(os.getenv("BENCH_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '%s{"requests":%d,"seconds":%f,"p50_us":%f,"p99_us":%f,"errors":%d}\\n',
    "BENCH_JSON ", summary.requests, summary.duration / 1e6,
    latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout + e.status))
end
"""
# No `response` callback: defining one makes wrk parse every body, and its counters
# would live in per-thread Lua states that `done` cannot see. e.status counts non-2xx/3xx.


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What one load run measured."""

    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    tool: str

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def run_wrk(
    url: str,
    body_file: Path,
    *,
    connections: int,
    duration_s: float,
    placement: Placement,
    think_ms: int | None = None,
) -> LoadResult:
    """wrk flat out; with `think_ms`, each connection waits that long after every answer
    (paced: about connections / (think + latency) requests a second)."""
    script = body_file.with_suffix(".lua" if think_ms is None else f".think{think_ms}.lua")
    pace = "" if think_ms is None else f"function delay() return {int(think_ms)} end\n"
    script.write_text(WRK_SCRIPT + pace)
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(duration_s))}s"]
    argv += ["--timeout", "10s", "-s", str(script), url]
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=duration_s + 30,
        env={"BENCH_BODY_FILE": str(body_file), "PATH": "/usr/bin:/bin"},
        preexec_fn=placement.apply,
        check=True,
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith(WRK_MARK))
    data = json.loads(line.removeprefix(WRK_MARK))
    return LoadResult(
        data["requests"],
        data["errors"],
        data["seconds"],
        data["p50_us"] / 1000,
        data["p99_us"] / 1000,
        "wrk",
    )


def run_python(
    url: str,
    body_file: Path,
    *,
    connections: int,
    duration_s: float,
    requests: int | None,
    placement: Placement,
    rate: float | None = None,
) -> LoadResult:
    """Run the built-in generator in its own process and parse its JSON line."""
    argv = [sys.executable, "-m", "bench.loadgen", "--url", url, "--body-file", str(body_file)]
    argv += ["--connections", str(connections), "--duration", str(duration_s)]
    if requests is not None:
        argv += ["--requests", str(requests)]
    if rate is not None:
        argv += ["--rate", str(rate)]
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=duration_s + 60,
        env=python_env(),
        preexec_fn=placement.apply,
        check=True,
    ).stdout
    return LoadResult(**json.loads(out.strip().splitlines()[-1]))


async def generate(
    url: str, body: bytes, connections: int, duration_s: float, requests: int | None
) -> LoadResult:
    """N workers over N connections until the duration passes or `requests` are done."""
    latencies: list[float] = []
    errors = 0
    issued = 0
    headers = {"content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        stop_at = start + duration_s

        async def worker() -> None:
            nonlocal errors, issued
            while time.perf_counter() < stop_at and (requests is None or issued < requests):
                issued += 1
                t0 = time.perf_counter()
                try:
                    async with session.post(url, data=body, headers=headers) as resp:
                        await resp.read()
                        ok = resp.status == 200
                except aiohttp.ClientError:
                    ok = False
                latencies.append(time.perf_counter() - t0)
                errors += not ok

        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - start
    ms = [x * 1000 for x in latencies]
    return LoadResult(len(ms), errors, elapsed, percentile(ms, 50), percentile(ms, 99), "python")


async def paced(
    url: str, body: bytes, connections: int, duration_s: float, rate: float
) -> LoadResult:
    """Open loop: one request every 1/rate s on schedule, latency from the scheduled start."""
    latencies: list[float] = []
    errors = 0
    headers = {"content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(due: float) -> None:
            nonlocal errors
            try:
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    errors += resp.status != 200
            except aiohttp.ClientError:
                errors += 1
            latencies.append(time.perf_counter() - due)

        tasks: set[asyncio.Task[None]] = set()
        start = time.perf_counter()
        total = int(duration_s * rate)
        for k in range(total):
            due = start + k / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(one(due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    ms = [x * 1000 for x in latencies]
    return LoadResult(len(ms), errors, elapsed, percentile(ms, 50), percentile(ms, 99), "python")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="POST load generator (closed loop or paced)")
    parser.add_argument("--url", required=True)
    parser.add_argument("--body-file", type=Path, required=True)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--rate", type=float, default=None, help="open loop: requests/s")
    args = parser.parse_args(argv)
    body = args.body_file.read_bytes()
    coro = (
        paced(args.url, body, args.connections, args.duration, args.rate)
        if args.rate
        else generate(args.url, body, args.connections, args.duration, args.requests)
    )
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(coro)
    else:
        result = uvloop.run(coro)
    print(json.dumps(asdict(result)))


if __name__ == "__main__":
    main()
