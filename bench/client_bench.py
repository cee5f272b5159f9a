"""The upstream client's own cost: CPU per request of aiohttp's session, httpx's client and
the proxy's `H1Client`, each sending the bench's small chat request to the same upstream.

Run: `python -m bench.client_bench [--requests N] [--concurrency C] [--rounds R]`.

One process, pinned to the first CPU (the upstream on the others), sends N requests with C
at a time through each client in turn, R rounds alternating, and reads its own CPU time
(`getrusage`) around each: what a proxy pays its client on every request. The upstream is
nginx when installed (`bench/setup.sh`), else the built-in one. The table gives each
client's median over the rounds, with the spread, and its ratio to `H1Client`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import httpx
import orjson
import uvloop

from bench import upstream
from bench.conversations import small_request
from bench.procs import Processes, placements
from bench.servers import start_upstreams
from proxy.upstream.client import UpstreamClient, UpstreamRequest
from proxy.upstream.connect import open_client
from proxy.upstream.httpx_client import HttpxClient

Send = Callable[[], Awaitable[None]]


async def _aiohttp(url: str, body: bytes, run: Callable[[Send], Awaitable[float]]) -> float:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:

        async def send() -> None:
            headers = {"content-type": "application/json"}
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()

        return await run(send)


async def _upstream_client(
    client: UpstreamClient, url: str, body: bytes, run: Callable[[Send], Awaitable[float]]
) -> float:
    request = UpstreamRequest("POST", url, ((b"content-type", b"application/json"),), body, 5, 5)

    async def send() -> None:
        response = await client.send(request)
        try:
            while await response.read():
                pass
        finally:
            await response.aclose()

    return await run(send)


async def _h1(url: str, body: bytes, run: Callable[[Send], Awaitable[float]]) -> float:
    async with open_client() as client:
        return await _upstream_client(client, url, body, run)


async def _httpx(url: str, body: bytes, run: Callable[[Send], Awaitable[float]]) -> float:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncHTTPTransport(limits=limits) as transport:
        return await _upstream_client(HttpxClient(transport), url, body, run)


CLIENTS = {"H1Client": _h1, "aiohttp": _aiohttp, "httpx": _httpx}


def _runner(requests: int, concurrency: int) -> Callable[[Send], Awaitable[float]]:
    async def run(send: Send) -> float:
        """CPU seconds per request of `requests` sends, `concurrency` at a time."""
        for _ in range(concurrency):  # open the connections first
            await send()

        async def worker(count: int) -> None:
            for _ in range(count):
                await send()

        before = resource.getrusage(resource.RUSAGE_SELF)
        await asyncio.gather(*(worker(requests // concurrency) for _ in range(concurrency)))
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        return cpu / (requests // concurrency * concurrency)

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    body = orjson.dumps(small_request())
    server, others = placements(pin=True)
    with tempfile.TemporaryDirectory() as tmp, Processes(Path(tmp)) as procs:
        found = start_upstreams(procs, Path(tmp), upstream.Plan(), others, "auto")
        url = found.origin + "/v1/chat/completions"
        if server.cpus:
            os.sched_setaffinity(0, server.cpus)
        run = _runner(args.requests, args.concurrency)
        cpu: dict[str, list[float]] = {name: [] for name in CLIENTS}
        for _ in range(args.rounds):
            for name, bench in CLIENTS.items():
                cpu[name].append(uvloop.run(bench(url, body, run)))
    _report(cpu, found.kind, args)


def _report(cpu: dict[str, list[float]], kind: str, args: argparse.Namespace) -> None:
    print(f"# upstream clients: {args.requests} small requests, {args.concurrency} at a time,")
    print(f"# {args.rounds} alternating rounds, upstream {kind}, one pinned process (uvloop)\n")
    print("| client | CPU us/request, median [min, max] | vs H1Client |")
    print("|---|---|---|")
    ours = statistics.median(cpu["H1Client"])
    for name, values in cpu.items():
        mid = statistics.median(values)
        spread = f"[{min(values) * 1e6:.0f}, {max(values) * 1e6:.0f}]"
        print(f"| {name} | {mid * 1e6:.0f} {spread} | {mid / ours:.2f}x |")


if __name__ == "__main__":
    main()
