"""Hot reload over real sockets: a held stream keeps its config; SIGHUP reaches every worker."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from proxy.config.loader import load_config
from proxy.observability.exchange import ExchangeRecord
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.fakes.servers import HOST, ServerThread
from tests.fakes.upstream import Behavior, FakeOpenAI

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
WAIT_S = 30.0
CONFIG = """\
upstreams:
  fake: {base_url: "%(origin)s/v1"}
  spare: {base_url: "%(origin)s/v1"}
policies:
  aaaa: {curators: []}
  bbbb: {curators: [{turn_window: {max_turns: 50}}]}
routes:
  - name: default
    upstream: %(upstream)s
    policy: %(policy)s
audit: {sink: none}
metrics: {enabled: false}
"""


def write_config(path: Path, origin: str, policy: str, upstream: str = "fake") -> None:
    path.write_text(CONFIG % {"origin": origin, "policy": policy, "upstream": upstream})


def body(stream: bool = False) -> bytes:
    messages = [{"role": "user", "content": "Count to six."}]
    return orjson.dumps({"model": "gpt-4o", "messages": messages, "stream": stream})


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def policy_of(origin: str) -> str:
    response = httpx.post(origin + CHAT, content=body(), timeout=30)
    assert response.status_code == 200
    return response.headers["x-curator-policy"]


# -- a held stream across a reload -----------------------------------------------------------
def test_a_held_stream_finishes_on_the_config_it_started_with(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    path = tmp_path / "config.yaml"
    write_config(path, fake.origin, "aaaa")
    records: list[ExchangeRecord] = []
    app = create_app(load_config(path), watch_interval_s=0.05, observers=(records.append,))
    release = threading.Event()
    fake.queue(Behavior(reply="one two three four", release=release))
    with ServerThread(app, **{**uvicorn_options(), "log_level": "warning"}) as server:
        with httpx.stream("POST", server.origin + CHAT, content=body(True), timeout=30) as held:
            chunks = held.iter_raw()
            first = next(chunks)
            write_config(path, fake.origin, "bbbb", upstream="spare")
            wait_until(lambda: policy_of(server.origin) == "bbbb", "the reload")
            release.set()
            rest = b"".join(chunks)
        wait_until(lambda: len(records) >= 2, "the held stream's record")
    assert first + rest == fake.sent[0]
    assert rest.endswith(b"data: [DONE]\n\n")
    assert held.headers["x-curator-policy"] == "aaaa"
    by_id = {r.id: r for r in records}
    old = by_id[held.headers["x-curator-request-id"]]
    assert (old.policy, old.upstream, old.outcome) == ("aaaa", "fake", "ok")
    # The polls before the swap saw the old config whole, the ones after the new one whole.
    seen = {(r.policy, r.upstream) for r in records if r is not old}
    assert ("bbbb", "spare") in seen
    assert seen <= {("aaaa", "fake"), ("bbbb", "spare")}


# -- `curator serve` subprocesses --------------------------------------------------------------
class Serve:
    """`curator serve` in a subprocess, its log in a file."""

    def __init__(self, config: Path, *args: str) -> None:
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            self.port = sock.getsockname()[1]
        self.origin = f"http://{HOST}:{self.port}"
        self.log = config.parent / "serve.log"
        env = {**os.environ, "TIKTOKEN_CACHE_DIR": os.environ.get("TIKTOKEN_CACHE_DIR", "")}
        command = [
            sys.executable,
            "-m",
            "proxy.cli.main",
            "serve",
            "--config",
            str(config),
        ]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, "--host", HOST, "--port", str(self.port), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=config.parent,
                env=env,
            )
        wait_until(self.healthy, "curator serve to start")

    def healthy(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"curator serve exited:\n{self.log.read_text()}")
        try:
            return httpx.get(self.origin + "/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def started(self) -> int:
        """How many worker processes have finished their startup (uvicorn's own log line)."""
        return self.log.read_text().count("Application startup complete.")

    def reloads(self, trigger: str) -> set[str]:
        """The pids that logged a reload by `trigger`."""
        pattern = rf"config reloaded from \S+ \({trigger}, pid (\d+)\)"
        return set(re.findall(pattern, self.log.read_text()))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    started: list[Serve] = []

    def start(*args: str) -> Serve:
        started.append(Serve(tmp_path / "config.yaml", *args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def edit_unseen(path: Path, old: str, new: str) -> None:
    """Edit in place, keeping size, inode and mtime: only SIGHUP can notice this change."""
    assert len(old) == len(new)
    before = path.stat()
    text = path.read_text().replace(old, new)
    with path.open("r+") as file:
        file.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        before.st_mtime_ns,
        before.st_size,
        before.st_ino,
    )


def test_sighup_reloads_a_serve_process(
    tmp_path: Path, fake: FakeOpenAI, serve: Callable[..., Serve]
) -> None:
    path = tmp_path / "config.yaml"
    write_config(path, fake.origin, "aaaa")
    server = serve()
    assert policy_of(server.origin) == "aaaa"
    edit_unseen(path, "policy: aaaa", "policy: bbbb")
    assert policy_of(server.origin) == "aaaa"
    server.process.send_signal(signal.SIGHUP)
    wait_until(lambda: policy_of(server.origin) == "bbbb", "the SIGHUP reload")
    assert server.reloads("SIGHUP") == {str(server.process.pid)}
    assert server.process.poll() is None


def test_sighup_and_file_changes_reload_every_worker(
    tmp_path: Path, fake: FakeOpenAI, serve: Callable[..., Serve]
) -> None:
    path = tmp_path / "config.yaml"
    write_config(path, fake.origin, "aaaa")
    server = serve("--workers", "2")
    wait_until(lambda: server.started() == 2, "both workers to start")
    edit_unseen(path, "policy: aaaa", "policy: bbbb")
    server.process.send_signal(signal.SIGHUP)  # to the parent, which forwards it
    wait_until(lambda: len(server.reloads("SIGHUP")) == 2, "both workers' SIGHUP reloads")
    assert str(server.process.pid) not in server.reloads("SIGHUP")
    assert {policy_of(server.origin) for _ in range(6)} == {"bbbb"}
    write_config(path, fake.origin, "aaaa", upstream="spare")  # a visible edit this time
    wait_until(lambda: len(server.reloads("file change")) == 2, "both workers' file reloads")
    assert server.reloads("file change") == server.reloads("SIGHUP")  # the same two workers
    assert {policy_of(server.origin) for _ in range(6)} == {"aaaa"}
