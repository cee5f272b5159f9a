"""Run the benchmark suite and print one markdown table (also saved under bench/results/).

    python -m bench.run [--quick] [--cases small,large,stream,memory] [--duration S]

Starts, on loopback only: a fixed-response upstream (nginx when installed, else the
built-in one), the raw floor, the proxy (`curator serve`, 1 worker) and, when importable,
LiteLLM's proxy. Every process it starts is stopped on the way out, whatever happens, and
the whole run is bounded by `--timeout`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import math
import os
import platform
import signal
import sys
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from bench import cases, hol, large, latency, scaling, servers, streams, upstream
from bench.loadgen import have_wrk
from bench.procs import Processes, StartError, placements
from bench.report import Row, markdown_table

CASES = ("small", "c1", "large", "stream", "hol", "memory", "audit", "scale")
SHARED_TIKTOKEN = Path(__file__).resolve().parent.parent.parent / "shared" / "tiktoken"
RESULTS = Path(__file__).resolve().parent / "results"


def settings_from(args: argparse.Namespace) -> cases.Settings:
    if args.quick:
        return cases.Settings(
            quick=True,
            duration_s=args.duration or 1.0,
            connections=8,
            requests=150,
            warm_reps=6,
            cold_reps=2,
            stream_reps=5,
            ratio_rounds=1,
            streams=50,
            hold_s=0.5,
            load=args.load,
        )
    return cases.Settings(
        duration_s=args.duration or 10.0, connections=args.connections, load=args.load
    )


def stream_plan(settings: cases.Settings) -> upstream.Plan:
    # Trickling streams must outlive opening all of them plus the hold.
    gap = 0.5
    events = math.ceil((settings.hold_s + 45) / gap)
    return upstream.Plan(sse_events=6, sse_gap_s=0.01, trickle_events=events, trickle_gap_s=gap)


def start_all(procs: Processes, args: argparse.Namespace, settings: cases.Settings) -> cases.Bench:
    workdir = procs.logdir
    server, client = placements(not args.no_pin)
    ups = servers.start_upstreams(procs, workdir, stream_plan(settings), client, args.upstream)
    floor = servers.start_floor(procs, ups, server)
    proxy, proxy_reason = None, ""
    if not servers.proxy_available():
        proxy_reason = "proxy not installed (curator serve)"
    else:
        try:
            proxy = servers.start_proxy(procs, workdir, ups, server, args.audit)
        except StartError as exc:
            proxy_reason = "proxy failed to start (its log is on stderr)"
            print(exc, file=sys.stderr)
    litellm, litellm_reason = None, ""
    if "small" not in args.cases:
        litellm_reason = "not run"
    elif not servers.litellm_available():
        litellm_reason = "litellm not importable"
    else:
        try:
            litellm = servers.start_litellm(procs, workdir, ups.origin, server, cases.SMALL_MODEL)
        except StartError as exc:
            litellm_reason = "litellm failed to start (its log is on stderr)"
            print(exc, file=sys.stderr)
    return cases.Bench(
        settings=settings,
        workdir=workdir,
        upstreams=ups,
        floor=floor,
        proxy=proxy,
        proxy_reason=proxy_reason,
        litellm=litellm,
        litellm_reason=litellm_reason,
        client=client,
        proxy_pid=procs.pid("proxy") if proxy else None,
        floor_pid=procs.pid("floor"),
        procs=procs,
        server=server,
        audit=args.audit,
    )


async def run_cases(bench: cases.Bench, names: Sequence[str]) -> list[Row]:
    async_cases: dict[str, Callable[[cases.Bench], Coroutine[Any, Any, list[Row]]]] = {
        "large": large.large,
        "stream": streams.stream,
        "hol": hol.hol,
        "c1": latency.c1,
        "memory": streams.memory,
    }
    sync_cases: dict[str, Callable[[cases.Bench], list[Row]]] = {
        "small": cases.small,
        "audit": scaling.audit,
        "scale": scaling.scale,
    }
    rows: list[Row] = []
    for name in CASES:
        if name not in names:
            continue
        print(f"running case {name} ...", file=sys.stderr, flush=True)
        if name in sync_cases:
            rows += await asyncio.to_thread(sync_cases[name], bench)
        else:
            rows += await async_cases[name](bench)
    return rows


def header(bench: cases.Bench, args: argparse.Namespace) -> str:
    s = bench.settings
    tool = (
        "wrk" if s.load == "wrk" or (s.load == "auto" and have_wrk() and not s.quick) else "python"
    )
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "\n".join(
        [
            f"# context-curator benchmark, {when}{' (quick)' if s.quick else ''}",
            "",
            f"- machine: {os.cpu_count()} CPUs, Linux {platform.release()}, Python "
            f"{platform.python_version()}; pinning: {'off' if args.no_pin else 'on'}",
            f"- upstream: {bench.upstreams.kind} (streams: built-in); load: {tool}, "
            f"{s.connections} connections, proxy audit sink: {args.audit}, "
            + (f"{s.requests} requests per run" if s.requests else f"{s.duration_s:g} s per run"),
            "- caveat: on 2 cores the load generator cannot have a core of its own: pinned, it",
            "  shares one with the upstream (the server under test has the other); unpinned, it",
            "  competes with the server. Anything else running disturbs both; compare ratios to",
            "  the floor, measured under the same conditions, rather than absolute figures.",
            "",
            "",
        ]
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="tiny, fast run (smoke test)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset")
    parser.add_argument("--duration", type=float, default=None, help="seconds per load run")
    parser.add_argument("--connections", type=int, default=32, help="load connections")
    parser.add_argument("--upstream", choices=("auto", "nginx", "builtin"), default="auto")
    parser.add_argument("--load", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument(
        "--audit",
        choices=("none", "sqlite", "jsonl"),
        default="sqlite",
        help="the proxy's audit sink: sqlite, as the default config (none: the proxy alone)",
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the results file")
    parser.add_argument("--timeout", type=float, default=1800, help="bound on the whole run (s)")
    args = parser.parse_args(argv)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"--cases: unknown {unknown}; expected a subset of {list(CASES)}")
    return args


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(f"bench: stopped by signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if SHARED_TIKTOKEN.is_dir():
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED_TIKTOKEN))
    settings = settings_from(args)
    # SIGTERM, and the overall bound (SIGALRM), unwind through `Processes.__exit__`.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGALRM, _interrupt)
    signal.alarm(max(1, math.ceil(args.timeout)))
    try:
        with tempfile.TemporaryDirectory(prefix="curator-bench-") as tmp:
            os.chmod(tmp, 0o755)  # nginx workers may run as another user
            with Processes(Path(tmp)) as procs:
                bench = start_all(procs, args, settings)
                if not args.no_pin:
                    bench.client.apply()
                rows = asyncio.run(run_cases(bench, args.cases))
                text = header(bench, args) + markdown_table(rows) + "\n"
    finally:
        signal.alarm(0)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    (args.out / f"{stamp}.md").write_text(text)
    print(f"saved {args.out / (stamp + '.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
