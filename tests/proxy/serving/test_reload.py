"""Hot reload: validated, swapped whole, counted; the last good config survives a bad edit."""

from __future__ import annotations

import logging
import os
import signal
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from policies.errors import ConfigError
from policies.summary_cache import MEMORY
from proxy.config.loader import (
    Config,
    ConfigFileError,
    default_config,
    file_stamp,
    load_config,
)
from proxy.serving import reload
from proxy.serving.app import create_app
from proxy.serving.edge import Edge
from proxy.serving.reload import Live, Reloader, reloading
from tests import factories as f

CHAT = "/v1/chat/completions"
WAIT_S = 10.0

CONFIG = """\
server: {port: 8080}
upstreams:
  main: {base_url: "https://upstream.test/v1"}
  other: {base_url: "https://other.test/v1"}
models:
  "house-*": {context_window: 32000}
policies:
  agents: agents.yaml
  chat: preset:chat
routes:
  - name: default
    upstream: main
    policy: agents
audit: {sink: none}
"""
PASSTHROUGH = "curators: []\n"
TRUNCATING = """\
curators:
  - tool_result_truncation: {max_tokens: 40, keep_recent: 0}
"""
SUMMARIZING = """\
curators:
  - tool_result_truncation: {max_tokens: 40, keep_recent: 0}
  - summarizer: {upstream: %s, model: small, trigger_tokens: 100000}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    write(tmp_path / "agents.yaml", PASSTHROUGH)
    return write(tmp_path / "config.yaml", CONFIG)


def history() -> bytes:
    messages = [
        *f.log_read(300),
        f.user("Summarize it."),
    ]
    return orjson.dumps({"model": "gpt-4o", "messages": messages})


def ok(_request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"ok": True})


def serve(config_path: Path, interval_s: float | None = None) -> TestClient:
    config = load_config(config_path)
    app = create_app(config, httpx.MockTransport(ok), watch_interval_s=interval_s)
    return TestClient(app)


def reloader(client: TestClient) -> Reloader:
    found: Reloader = client.app_state["reloader"]
    return found


def edge(client: TestClient) -> Edge:
    live: Live[Edge] = client.app_state["edge"]
    return live.current


def wait_until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def reloads(client: TestClient, result: str) -> float:
    metrics = edge(client).metrics
    assert metrics is not None
    value = metrics.registry.get_sample_value("curator_config_reloads_total", {"result": result})
    return value or 0.0


def curated(client: TestClient) -> bool:
    return "x-curator-actions" in client.post(CHAT, content=history()).headers


# -- sources and validation ----------------------------------------------------------------
def test_sources_are_the_config_and_its_policy_files_as_read(config_path: Path) -> None:
    stamps = [file_stamp(str(p)) for p in (config_path, config_path.parent / "agents.yaml")]
    config = load_config(config_path)
    assert list(config.sources) == [str(config_path), str(config_path.parent / "agents.yaml")]
    assert list(config.sources.values()) == stamps
    assert None not in stamps
    assert dict(default_config().sources) == {}


def test_a_failed_load_still_names_every_file_the_config_named(config_path: Path) -> None:
    text = CONFIG.replace("chat: preset:chat", "chat: missing.yaml")
    with pytest.raises(ConfigFileError) as caught:
        load_config(write(config_path, text))
    assert dict(caught.value.sources) == {
        str(config_path): file_stamp(str(config_path)),
        str(config_path.parent / "agents.yaml"): file_stamp(
            str(config_path.parent / "agents.yaml")
        ),
        str(config_path.parent / "missing.yaml"): None,
    }


def test_a_file_that_cannot_be_parsed_is_still_named(config_path: Path) -> None:
    write(config_path, "routes: [\n")
    with pytest.raises(ConfigFileError) as caught:
        load_config(config_path)
    assert list(caught.value.sources) == [str(config_path)]


def test_a_summarizer_must_name_a_configured_upstream(config_path: Path) -> None:
    inline = CONFIG.replace(
        "  chat: preset:chat\n",
        "  chat:\n"
        "    curators:\n"
        "      - turn_window: {max_turns: 10}\n"
        "      - summarizer: {upstream: opnai, model: small}\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(write(config_path, inline))
    assert [str(p) for p in caught.value.problems] == [
        f"{config_path}:12: policies.chat.curators[1].summarizer.upstream: "
        "unknown upstream 'opnai'; known: main, other"
    ]


def test_a_policy_files_summarizer_is_checked_against_the_configs_upstreams(
    config_path: Path,
) -> None:
    write(config_path.parent / "agents.yaml", SUMMARIZING % "elsewhere")
    with pytest.raises(ConfigError) as caught:
        load_config(config_path)
    assert [str(p) for p in caught.value.problems] == [
        f"{config_path}:8: policies.agents.curators[1].summarizer.upstream: "
        "unknown upstream 'elsewhere'; known: main, other"
    ]
    write(config_path.parent / "agents.yaml", SUMMARIZING % "other")
    assert load_config(config_path).policies["agents"].is_async


# -- reloading -----------------------------------------------------------------------------
def test_editing_a_policy_file_reloads_it(config_path: Path) -> None:
    with serve(config_path, interval_s=0.02) as client:
        assert not curated(client)
        write(config_path.parent / "agents.yaml", TRUNCATING)
        wait_until(lambda: curated(client))
        assert reloads(client, "ok") == 1
        assert reloads(client, "error") == 0


def test_an_edit_between_loading_and_serving_is_still_noticed(config_path: Path) -> None:
    config = load_config(config_path)  # a worker reads its config, then starts up...
    write(config_path.parent / "agents.yaml", TRUNCATING)  # ...while the file is edited
    app = create_app(config, httpx.MockTransport(ok), watch_interval_s=0.02)
    with TestClient(app) as client:
        wait_until(lambda: curated(client))


def test_an_invalid_edit_keeps_the_last_good_config_logs_where_and_counts(
    config_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy_file = config_path.parent / "agents.yaml"
    with serve(config_path) as client:
        write(policy_file, TRUNCATING)
        assert client.portal.call(reloader(client).reload, "test") == "ok"
        write(policy_file, TRUNCATING.replace("max_tokens: 40", "max_tokens: -1"))
        with caplog.at_level(logging.ERROR, logger="curator.reload"):
            assert client.portal.call(reloader(client).reload, "test") == "error"
        assert curated(client)  # still the good truncating policy
        assert (reloads(client, "ok"), reloads(client, "error")) == (1, 1)
    (message,) = [r.getMessage() for r in caplog.records if r.name == "curator.reload"]
    assert message == (
        "config reload (test) rejected, keeping the running config: "
        f"{policy_file}:2: curators[0].tool_result_truncation.max_tokens: must be > 0, got -1"
    )


def test_a_fix_to_a_policy_file_only_the_failed_config_named_is_noticed(
    config_path: Path,
) -> None:
    with serve(config_path, interval_s=0.02) as client:
        broken = write(config_path.parent / "new.yaml", "curators: [{nope: {}}]\n")
        write(config_path, CONFIG.replace("agents: agents.yaml", "agents: new.yaml"))
        wait_until(lambda: reloads(client, "error") == 1)
        assert not curated(client)
        write(broken, TRUNCATING)  # the running config never named new.yaml
        wait_until(lambda: curated(client))
        assert str(broken) in edge(client).config.sources


def test_an_in_flight_exchange_keeps_the_edge_it_started_with(config_path: Path) -> None:
    with serve(config_path) as client:
        live: Live[Edge] = client.app_state["edge"]
        started_with = live.current  # what an exchange reads once, at its start
        write(config_path.parent / "agents.yaml", TRUNCATING)
        client.portal.call(reloader(client).reload, "test")
        assert live.current is not started_with
        assert not started_with.config.policies["agents"].chain.curators
        assert live.current.config.policies["agents"].chain.curators
        assert live.current.client is started_with.client  # the upstream pool stays


def test_restart_only_sections_keep_their_running_values(
    config_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(config_path) as client:
        changed = CONFIG.replace("port: 8080", "port: 9090").replace(
            "policy: agents", "policy: chat"
        )
        write(config_path, changed)
        with caplog.at_level(logging.WARNING, logger="curator.reload"):
            assert client.portal.call(reloader(client).reload, "test") == "ok"
        config = edge(client).config
        assert (config.server.port, config.routes[0].policy) == (8080, "chat")
    assert f"config reload: `server` changed in {config_path} but needs a restart; ignored" in [
        r.getMessage() for r in caplog.records
    ]


def test_the_token_counter_and_its_cache_stay_unless_the_models_table_changes(
    config_path: Path,
) -> None:
    with serve(config_path) as client:
        before = edge(client).curation
        client.portal.call(reloader(client).reload, "test")
        assert edge(client).curation.counter is before.counter
        assert edge(client).curation.loaded is before.loaded
        write(config_path, CONFIG.replace("32000", "64000"))
        client.portal.call(reloader(client).reload, "test")
        after = edge(client).curation.counter
        assert after is not before.counter
        assert after.models.lookup("house-1").context_window == 64000
        # Requests in flight before and after either reload share their tools lists.
        assert edge(client).curation.tools is before.tools


def test_a_reload_that_adds_a_summarizer_gets_its_cache(config_path: Path) -> None:
    with serve(config_path) as client:
        assert dict(edge(client).caches) == {}
        write(config_path.parent / "agents.yaml", SUMMARIZING % "other")
        client.portal.call(reloader(client).reload, "test")
        caches = edge(client).caches
        assert list(caches) == [MEMORY]
        client.portal.call(reloader(client).reload, "test")
        assert edge(client).caches[MEMORY] is caches[MEMORY]  # kept: still the same spec


def test_the_hook_hears_every_attempt_with_the_new_config(config_path: Path) -> None:
    heard: list[tuple[str, Config | None]] = []

    async def attempt() -> None:
        async with reloading(
            running, on_reload=lambda r, c: heard.append((r, c)), interval_s=None
        ) as r:
            await r.reload("test")
            write(config_path.parent / "agents.yaml", "curators: 3\n")
            await r.reload("test")

    with serve(config_path) as client:
        running = edge(client)
        client.portal.call(attempt)
    (first, config), second = heard
    assert first == "ok"
    assert config is not None
    assert config.source == str(config_path)
    assert second == ("error", None)


# -- SIGHUP --------------------------------------------------------------------------------
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sighup_guard() -> Iterator[None]:
    """Never let a test's SIGHUP reach the default handler (which would end pytest)."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGHUP, previous)


async def sighup(app: Starlette, check: Callable[[Live[Edge]], bool]) -> None:
    """Run `app`'s lifespan in this (main) thread, send SIGHUP, wait for `check`."""
    async with app.router.lifespan_context(app) as state:
        assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, signal.SIG_IGN)
        os.kill(os.getpid(), signal.SIGHUP)
        with anyio.fail_after(WAIT_S):
            while not check(state["edge"]):
                await anyio.sleep(0.01)
    assert signal.getsignal(signal.SIGHUP) in (signal.SIG_DFL, signal.SIG_IGN)  # handler gone


@pytest.mark.anyio
@pytest.mark.usefixtures("sighup_guard")
async def test_sighup_reloads_in_the_main_thread(config_path: Path) -> None:
    app = create_app(load_config(config_path), httpx.MockTransport(ok), watch_interval_s=None)
    write(config_path.parent / "agents.yaml", TRUNCATING)
    await sighup(app, lambda live: bool(live.current.config.policies["agents"].chain.curators))


@pytest.mark.anyio
@pytest.mark.usefixtures("sighup_guard")
async def test_sighup_without_a_config_file_only_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(default_config({}), httpx.MockTransport(ok))
    said = "SIGHUP: running on built-in defaults (no config file), nothing to reload"
    with caplog.at_level(logging.INFO, logger="curator.reload"):
        await sighup(app, lambda _live: said in caplog.messages)


class Worker:
    def __init__(self, pid: int | None, ready: bool) -> None:
        self.pid, self.ready = pid, ready

    def is_ready(self, timeout: float) -> bool:
        return self.ready and timeout > 0


def test_the_supervisor_forwards_sighup_to_serving_workers_only() -> None:
    sent: list[tuple[int, int]] = []
    workers = [Worker(101, True), Worker(102, False), Worker(None, True), Worker(104, True)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reload.os, "kill", lambda pid, sig: sent.append((pid, sig)))
        assert reload.forward_sighup(workers) == 2  # type: ignore[arg-type]
    assert sent == [(101, signal.SIGHUP), (104, signal.SIGHUP)]
