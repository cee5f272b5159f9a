"""The proxy's own CPU per small request, by configuration, without HTTP: where the gap to
the floor is.

Run: `python -m bench.app_bench [--requests N] [--rounds R]`.

Each configuration runs in a process of its own, pinned to the first CPU: the app as
`curator serve` builds it (`prepare_process`, the startup freeze), driven through its ASGI
interface with the bench's small chat request, 32 at a time, its upstream a stub that
answers the fixed chat completion at once. What is measured is the process's CPU time
(`process_time`: every thread, the audit writer's too) per request, after a warm-up: the
app's work alone, none of uvicorn's, the sockets' or the upstream client's, so the figures
move by a few percent where req/s under load moves by tens. The configurations, run in
turn, R rounds:

- passthrough, audit off / SQLite: a route with `preset:passthrough`;
- default, audit off / SQLite: the config-less defaults (`preset:default`; the last is what
  `curator serve` runs with no config file);
- default, audit off, otel on: the same with OpenTelemetry traces and metrics exported over
  OTLP/HTTP to a sink in another process that answers every export 200 (its CPU is not
  counted; the export's own threads are).

The table gives each one's median and spread, and below it what the audit and the default
preset each add (the medians' differences). Set beside the floor's whole request from
outside (the `small` case's "us CPU/request"), they say how far a configuration is from
0.8x the floor's req/s.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import uvloop

from bench import conversations, upstream
from bench.procs import python_env
from bench.run import SHARED_TIKTOKEN
from proxy.config.loader import Config, default_config, load_config
from proxy.serving.app import create_app
from proxy.serving.server import freeze_survivors, prepare_process
from proxy.types import Message
from proxy.upstream.client import UpstreamRequest

CONFIGS = (
    "passthrough, audit off",
    "passthrough, audit sqlite",
    "default, audit off",
    "default",
    "default, audit off, otel on",
)
OTLP_SINK = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = HTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
"""An OTLP/HTTP collector stand-in that accepts and discards every export."""
CONCURRENCY = 32
WARMUP = 500
PATH = "/v1/chat/completions"
STUB_UPSTREAM = "http://127.0.0.1:9/v1"
"""Never connected to: the stub answers in its place."""


class _Answer:
    """The fixed chat completion, as an upstream response that has arrived in full."""

    status = 200
    headers = (
        (b"content-type", b"application/json"),
        (b"content-length", str(len(upstream.CHAT_COMPLETION)).encode()),
    )

    def __init__(self) -> None:
        self._sent = False

    async def read(self) -> bytes:
        if self._sent:
            return b""
        self._sent = True
        return upstream.CHAT_COMPLETION

    async def aclose(self) -> None:
        return None


class _Stub:
    async def send(self, _request: UpstreamRequest) -> _Answer:
        return _Answer()


def config_for(name: str, workdir: Path, otlp: str | None = None) -> Config:
    """The configuration `name` (one of `CONFIGS`), its audit store in `workdir`; `otlp`: the
    collector's URL for the otel one."""
    if name.endswith("otel on"):
        from proxy.config.otel import OtelConfig

        config = config_for(name.removesuffix(", otel on"), workdir)
        return dataclasses.replace(config, otel=OtelConfig(enabled=True, endpoint=otlp))
    if name.startswith("default"):
        config = default_config({"CURATOR_UPSTREAM": STUB_UPSTREAM})
        path = str(workdir / "audit.sqlite")
        audit = dataclasses.replace(config.audit, path=path)
        if name.endswith("audit off"):
            audit = dataclasses.replace(audit, sink="none")
        return dataclasses.replace(config, audit=audit)
    sink = "none" if name.endswith("audit off") else "sqlite"
    file = workdir / "curator.yaml"
    file.write_text(
        f"audit: {{sink: {sink}, path: {workdir / 'audit.sqlite'}}}\n"
        f"upstreams:\n  up: {{base_url: '{STUB_UPSTREAM}'}}\n"
        "policies:\n  pass: preset:passthrough\n"
        "routes:\n  - {name: all, upstream: up, policy: pass}\n"
    )
    return load_config(str(file))


async def _measure(config: Config, requests: int) -> float:
    """CPU microseconds per request of this process, `requests` after the warm-up."""
    prepare_process(config)
    app = create_app(config, watch_interval_s=None, on_started=freeze_survivors)
    state: dict[str, Any] = {}
    lifespan: asyncio.Queue[Message] = asyncio.Queue()
    started = asyncio.Event()

    async def events_out(message: Message) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    scope = {"type": "lifespan", "state": state, "asgi": {"version": "3.0"}}
    await lifespan.put({"type": "lifespan.startup"})
    serving = asyncio.create_task(app(scope, lifespan.get, events_out))
    await started.wait()
    live = state["edge"]
    live.current = dataclasses.replace(live.current, client=_Stub())
    body = orjson.dumps(conversations.small_request("gpt-4o-mini"))

    async def one() -> None:
        await _request(app, state, body)

    async def worker(count: int) -> None:
        for _ in range(count):
            await one()

    for _ in range(WARMUP):
        await one()
    each = max(1, requests // CONCURRENCY)
    cpu = time.process_time()
    await asyncio.gather(*(worker(each) for _ in range(CONCURRENCY)))
    await asyncio.sleep(0.1)  # the audit writer's last batch, counted with the rest
    used = time.process_time() - cpu
    await lifespan.put({"type": "lifespan.shutdown"})
    await serving
    return used * 1e6 / (each * CONCURRENCY)


async def _request(app: Any, state: Mapping[str, Any], body: bytes) -> None:
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer sk-bench"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": PATH,
        "raw_path": PATH.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 4000),
        "state": state,
    }
    received = False
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never leaves
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    if sent[0].get("status") != 200:
        raise RuntimeError(f"the app answered {sent[0]}")


def _child(name: str, requests: int) -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    sink = subprocess.Popen([sys.executable, "-c", OTLP_SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        otlp = f"http://127.0.0.1:{sink.stdout.readline().strip()}"
        with tempfile.TemporaryDirectory() as workdir:
            config = config_for(name, Path(workdir), otlp)
            print(json.dumps({"us": uvloop.run(_measure(config, requests))}))
    finally:
        sink.kill()
        sink.wait()


def _run_child(name: str, requests: int) -> float:
    argv = [sys.executable, "-m", "bench.app_bench", "--child", name, "--requests", str(requests)]
    done = subprocess.run(argv, env=python_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {done.stderr.strip().splitlines()[-1:]}")
    us: float = json.loads(done.stdout.strip().splitlines()[-1])["us"]
    return us


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.requests)
        return
    if SHARED_TIKTOKEN.is_dir():  # offline machines: the children inherit it
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED_TIKTOKEN))
    runs: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for _ in range(args.rounds):
        for name in CONFIGS:
            runs[name].append(_run_child(name, args.requests))
    medians = {name: statistics.median(values) for name, values in runs.items()}
    print(f"{args.requests} small requests, {CONCURRENCY} at a time, {args.rounds} rounds\n")
    print("| configuration | CPU us/request (median) | rounds |")
    print("|---|---|---|")
    for name, values in runs.items():
        spread = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {name} | {medians[name]:.0f} | {spread} |")
    audit = medians["default"] - medians["default, audit off"]
    preset = medians["default, audit off"] - medians["passthrough, audit off"]
    otel = medians["default, audit off, otel on"] - medians["default, audit off"]
    print(f"\nthe SQLite audit adds {audit:.0f} us, the default preset {preset:.0f} us")
    print(f"OpenTelemetry export (traces and metrics, OTLP/HTTP) adds {otel:.0f} us")


if __name__ == "__main__":
    main()
