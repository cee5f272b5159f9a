"""Soak: rounds of 500 concurrent streams with bursts of aborts, 5xx, resets and timeouts,
through a real `curator serve` on loopback; then proof that nothing leaked or got lost.

Run: `.venv/bin/python -m bench.soak [--rounds 30] [--concurrency 500] [--workers 1]`
(about 1-3 minutes with the defaults; it stops by itself). Every request carries a unique
marker in its message. After each round the proxy must settle: its file descriptors back to
the baseline once the upstream has closed the idle pooled connections, no socket left in
CLOSE_WAIT, and RSS flat from round to round. At the end every marker must be in the audit
log exactly once, and SIGTERM must end the proxy with exit code 0.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from types import MappingProxyType

import aiohttp
import orjson
import uvicorn

from bench.leaks import Sample, sample, tcp_connections
from bench.procs import Processes, free_port
from bench.soak_upstream import SoakUpstream

HOST = "127.0.0.1"
MIX = MappingProxyType({"stream": 60, "abort": 15, "error": 10, "timeout": 10, "reset": 5})
"""Per 100 requests of a round; all of a round's requests start at once."""
EXPECTED = MappingProxyType(
    {"stream": "done", "abort": "aborted", "error": "500", "timeout": "504", "reset": "cut"}
)
SLOW_READ_S = 1.0
"""The timeout route's read timeout; its upstream stalls three times as long."""
SETTLE_S = 30.0
FD_SLACK = 4
"""Descriptors that may come and go on their own (the audit file, a log rotation)."""
RSS_PER_REQUEST = 2048
"""Bounded caches (token counts, audit messages) keep well under this per unique request
until they are full; a per-request leak of a few KiB shows over a dozen rounds."""
RSS_FLOOR = 16 << 20
"""Allocator noise and caches warming up, below which growth means nothing."""


# -- load ---------------------------------------------------------------------------------------
async def one(session: aiohttp.ClientSession, url: str, mode: str, marker: str) -> str:
    """Send one request as `mode` wants; return what became of it (see EXPECTED)."""
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": marker}]}
    headers = {"x-soak": mode, "content-type": "application/json"}
    if mode == "timeout":
        headers["x-soak-route"] = "slow"
    try:
        async with session.post(url, data=orjson.dumps(body), headers=headers) as resp:
            if mode == "abort":
                await resp.content.readany()
                resp.close()  # leave mid-stream
                return "aborted"
            data = await resp.read()
    except aiohttp.ClientError as exc:
        return f"client error {type(exc).__name__}"
    if resp.status != 200:
        return str(resp.status)
    if data.endswith(b"data: [DONE]\n\n"):
        return "done"
    return "cut" if b"event: error" in data and b"[DONE]" not in data else "garbled"


def plan(count: int, rng: random.Random) -> list[str]:
    modes = [mode for mode, share in MIX.items() for _ in range(share)]
    return [modes[i % len(modes)] for i in rng.sample(range(count), count)]


async def burst(origin: str, round_no: int, modes: list[str]) -> tuple[Counter[str], list[str]]:
    """All of a round's requests at once, each on its own connection."""
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    timeout = aiohttp.ClientTimeout(total=60)
    markers = [f"soak-r{round_no}-{i}" for i in range(len(modes))]
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        url = origin + "/v1/chat/completions"
        results = await asyncio.gather(
            *(one(session, url, m, k) for m, k in zip(modes, markers, strict=True))
        )
    wrong = Counter(
        f"{mode}: {got}" for mode, got in zip(modes, results, strict=True) if got != EXPECTED[mode]
    )
    return wrong, markers


# -- the run ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Settings:
    rounds: int = 30
    concurrency: int = 500
    workers: int = 1
    seed: int = 1


@dataclass(slots=True)
class Report:
    baseline: Sample | None = None
    samples: list[Sample] = field(default_factory=list)
    wrong: Counter[str] = field(default_factory=Counter)
    sent: int = 0
    audit: Counter[str] = field(default_factory=Counter)
    exit_code: int | None = None
    seconds: float = 0.0

    def problems(self, markers: set[str]) -> list[str]:
        """Everything that shows a leak, a loss or a wrong answer; empty when all held."""
        found: list[str] = [f"{n} x {what}" for what, n in self.wrong.items()]
        if self.baseline is None or not self.samples:
            return [*found, "no samples"]
        last, base = self.samples[-1], self.baseline
        if last.own_fds > base.own_fds + FD_SLACK:
            found.append(f"descriptors grew from {base.own_fds} to {last.own_fds}")
        found += [f"{s.close_wait} socket(s) in CLOSE_WAIT" for s in self.samples if s.close_wait]
        grown = last.rss - self.samples[0].rss
        later = max(1.0, self.sent * (len(self.samples) - 1) / len(self.samples))
        if grown > max(RSS_FLOOR, RSS_PER_REQUEST * later):
            found.append(f"RSS grew {grown / later:.0f} bytes per request over {later:.0f}")
        lost = markers - set(self.audit)
        doubled = [m for m, n in self.audit.items() if n > 1]
        found += [f"{len(lost)} request(s) missing from the audit"] if lost else []
        found += [f"{len(doubled)} request(s) audited twice"] if doubled else []
        if self.exit_code != 0:
            found.append(f"exit code {self.exit_code} after SIGTERM")
        return found


def write_config(workdir: Path, upstream_port: int) -> Path:
    base = f"http://{HOST}:{upstream_port}/v1"
    path = workdir / "config.yaml"
    path.write_text(
        f"""upstreams:
  fast: {{base_url: "{base}", read_timeout_s: 30}}
  slow: {{base_url: "{base}", read_timeout_s: {SLOW_READ_S}}}
policies:
  off: preset:passthrough
routes:
  - {{name: slow, upstream: slow, policy: "off", match: {{headers: {{x-soak-route: slow}}}}}}
  - {{name: fast, upstream: fast, policy: "off"}}
audit: {{sink: jsonl, path: audit.jsonl}}
"""
    )
    return path


def audited(path: Path) -> Counter[str]:
    """How many audit records carry each marker."""
    seen: Counter[str] = Counter()
    if path.exists():
        for line in path.read_bytes().splitlines():
            record = orjson.loads(line)
            seen[record["original"][0]["content"]] += 1
    return seen


async def _settled(pid: int, upstream_port: int, proxy_port: int) -> Sample:
    """A sample once idle pooled connections have expired, every client has gone, and the
    descriptor count has stopped moving (closing sockets release theirs a moment later)."""
    deadline = time.monotonic() + SETTLE_S
    previous, steady = None, 0
    while True:
        current = sample(pid, upstream_port)
        clients, _ = tcp_connections(proxy_port)
        idle = current.upstream_connections == 0 and clients == 0
        steady = steady + 1 if idle and previous is not None and current.fds == previous.fds else 0
        if steady >= 3 or time.monotonic() > deadline:
            return current
        previous = current
        await asyncio.sleep(0.2)


async def soak(settings: Settings, workdir: Path, report: Report) -> set[str]:
    """Run every round against a proxy subprocess; fill `report`; return the markers sent."""
    rng = random.Random(settings.seed)
    listener = socket.create_server((HOST, 0), backlog=4096)
    upstream_port = listener.getsockname()[1]
    config = uvicorn.Config(
        SoakUpstream(stall_s=SLOW_READ_S * 3),
        loop="none",
        log_level="critical",
        timeout_keep_alive=1,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve(sockets=[listener]))
    proxy_port = free_port()
    origin = f"http://{HOST}:{proxy_port}"
    markers: set[str] = set()
    with Processes(workdir) as procs:
        argv = [sys.executable, "-m", "proxy.cli.main", "serve", "--config"]
        argv += [str(write_config(workdir, upstream_port)), "--host", HOST]
        argv += ["--port", str(proxy_port), "--workers", str(settings.workers)]
        proc = procs.start("proxy", argv, env={"PYTHONUNBUFFERED": "1"}, cwd=workdir)
        await asyncio.to_thread(procs.wait_http, "proxy", origin + "/healthz", 90)
        await burst(origin, 0, plan(50, rng))  # warm-up: tokenizers, pools, lazy imports
        report.baseline = await _settled(proc.pid, upstream_port, proxy_port)
        for round_no in range(1, settings.rounds + 1):
            wrong, sent = await burst(origin, round_no, plan(settings.concurrency, rng))
            report.wrong.update(wrong)
            markers.update(sent)
            report.samples.append(await _settled(proc.pid, upstream_port, proxy_port))
            _progress(round_no, report)
        proc.send_signal(signal.SIGTERM)
        report.exit_code = await asyncio.to_thread(proc.wait, 60)
    server.should_exit = True
    await serving
    report.sent = len(markers)
    all_audited = audited(workdir / "audit.jsonl")
    report.audit = Counter({m: n for m, n in all_audited.items() if not m.startswith("soak-r0-")})
    return markers


def _progress(round_no: int, report: Report) -> None:
    last = report.samples[-1]
    print(
        f"round {round_no:>3}: fds {last.own_fds:>4} (+{last.upstream_connections} pooled)  "
        f"RSS {last.rss / (1 << 20):7.1f} MiB  close_wait {last.close_wait}  "
        f"wrong so far {sum(report.wrong.values())}",
        flush=True,
    )


def run(settings: Settings) -> tuple[Report, list[str]]:
    """One soak from start to finish; the report and its problems (empty: all held)."""
    report = Report()
    started = time.monotonic()
    with TemporaryDirectory(prefix="curator-soak-") as tmp:
        markers = asyncio.run(soak(settings, Path(tmp), report))
    report.seconds = time.monotonic() - started
    return report, report.problems(markers)


def _mix() -> Iterator[str]:
    yield from (f"{mode} {share}%" for mode, share in MIX.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Settings()
    parser.add_argument("--rounds", type=int, default=default.rounds)
    parser.add_argument("--concurrency", type=int, default=default.concurrency)
    parser.add_argument("--workers", type=int, default=default.workers)
    parser.add_argument("--seed", type=int, default=default.seed)
    args = parser.parse_args(argv)
    settings = Settings(args.rounds, args.concurrency, args.workers, args.seed)
    print(f"soak: {settings.rounds} rounds x {settings.concurrency} ({', '.join(_mix())})")
    report, problems = run(settings)
    base = report.baseline
    if base is not None:
        print(f"baseline: fds {base.own_fds}, RSS {base.rss / (1 << 20):.1f} MiB")
    print(
        f"{report.sent} requests, {sum(report.audit.values())} audit records, "
        f"{report.seconds:.0f} s, exit code {report.exit_code}"
    )
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("OK: nothing leaked, lost or duplicated" if not problems else "FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
