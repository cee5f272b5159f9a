"""Run inside a private network namespace (see `tests.deploy.shipped`): start a fake upstream
and `curator serve` as a deployment would, probe it, report what happened as JSON on stdout.

Input (JSON on stdin): argv, env, cwd, probe (the deployment's health check command),
upstream_key (what the fake upstream requires), proxy_key (what a client sends).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.deploy.shipped import UPSTREAM_PORT
from tests.fakes.upstream import FakeOpenAI

PROXY = "http://127.0.0.1:8080"
START_TIMEOUT_S = 60.0
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "ping"}]}


def start_upstream(fake: FakeOpenAI) -> uvicorn.Server:
    sock = socket.socket()
    sock.bind(("127.0.0.1", UPSTREAM_PORT))
    config = uvicorn.Config(fake.app, log_level="warning", loop="asyncio", log_config=None)
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    return server


def wait_healthy(proxy: subprocess.Popen[bytes], probe: list[str]) -> bool:
    """Run the deployment's own health check until it passes or the proxy exits (bounded)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proxy.poll() is None:
        if subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0:
            return True
        time.sleep(0.2)
    return False


def exercise(spec: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
    with httpx.Client(base_url=PROXY, timeout=30) as client:
        keyed = client.post(
            "/v1/chat/completions",
            json=CHAT,
            headers={"authorization": f"Bearer {spec['proxy_key']}"},
        )
        keyless = client.post("/v1/chat/completions", json=CHAT)
    sent = [dict(r.headers).get(b"authorization", b"").decode() for r in fake.requests]
    return {
        "chat_status": keyed.status_code,
        "keyless_status": keyless.status_code,
        "upstream_authorizations": sent,
    }


def main() -> int:
    spec = json.loads(sys.stdin.read())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    fake = FakeOpenAI(api_key=spec["upstream_key"])
    upstream = start_upstream(fake)
    logs = Path(spec["cwd"])
    with (logs / "serve.out").open("wb") as out, (logs / "serve.err").open("wb") as err:
        proxy = subprocess.Popen(
            spec["argv"], env=spec["env"], cwd=spec["cwd"], stdout=out, stderr=err
        )
        try:
            result: dict[str, Any] = {"healthy": wait_healthy(proxy, spec["probe"])}
            if result["healthy"]:
                result.update(exercise(spec, fake))
            result["exit_code"] = proxy.poll()
        finally:
            proxy.terminate()
            proxy.wait(timeout=60)
    upstream.should_exit = True
    result["stderr"] = (logs / "serve.err").read_text(errors="replace")[-4000:]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
