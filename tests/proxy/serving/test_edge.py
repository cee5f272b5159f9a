"""serving/edge.py: what `open_edge` opens and closes with its stack, the routing flags it
decides once per config, and what `Edge.serving` (a reload) swaps and keeps.

Reloads through the running app (the client kept, a new summarizer's cache) are in
test_reload.py; here, `open_edge` and `Edge.serving` called directly."""

from __future__ import annotations

import asyncio
import dataclasses
import textwrap
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest

from policies.summary_cache import MEMORY
from proxy.config.loader import Config, load_config
from proxy.curation.plan import CurationSetup
from proxy.curation.thread import CurationThread
from proxy.observability.exchange import ExchangeRecord
from proxy.observability.observers import Observability, open_observability
from proxy.serving.edge import PRELOADED_MODELS, open_edge, preload
from proxy.upstream.httpx_client import HttpxClient

pytestmark = pytest.mark.anyio

BASE = """\
upstreams:
  main: {base_url: "https://main.test/v1"}
policies:
  plain: {curators: []}
audit: {sink: none}
metrics: {enabled: false}
routes:
"""
PLAIN = "  - {name: default, upstream: main, policy: plain}\n"
BY_HEADER = "  - {name: team, upstream: main, policy: plain, match: {headers: {x-team: a}}}\n"
BY_MODEL = "  - {name: small, upstream: main, policy: plain, match: {model: 'gpt-4o-mini*'}}\n"
SUMMARIZING = """\
  summarizing:
    curators:
      - summarizer: {upstream: main, model: small, trigger_tokens: 100000}
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the proxy is asyncio-only


def config(tmp_path: Path, *routes: str, base: str = BASE) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(base) + "".join(routes))
    return load_config(path, environ={})


def observer(_record: ExchangeRecord) -> None:
    return None


QUIET = Observability(metrics=None, audit=None, observers=(observer,))


class Upstream(httpx.AsyncBaseTransport):
    """Answers the model list after `answer` is set (never, by default); notes every URL."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.answer = asyncio.Event()
        self.cancelled = False
        self.closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        try:
            await self.answer.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return httpx.Response(200, json={"data": [{"id": "house-1", "max_model_len": 4096}]})

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as opened:
        yield opened


async def test_open_edge_wires_what_every_request_reads(
    tmp_path: Path, stack: AsyncExitStack
) -> None:
    cfg = config(tmp_path, PLAIN)
    edge = await open_edge(stack, cfg, Upstream(), QUIET, 4321)
    assert edge.config is cfg
    assert edge.loop is asyncio.get_running_loop()
    assert isinstance(edge.client, HttpxClient)
    assert (edge.observers, edge.max_body_bytes, edge.metrics) == ((observer,), 4321, None)
    assert dict(edge.caches) == {}  # no summarizer, no cache
    assert (edge.route_by_headers, edge.route_by_model) == (False, False)
    setup = edge.curation
    assert setup.config is cfg
    assert isinstance(setup.offload, CurationThread)
    assert setup.offload.turns is QUIET.turns  # the audit writer's too: one runs at a time
    assert setup.facts is not None
    # The preloaded encodings are known loaded, so no request waits for them.
    preloaded = {setup.counter.encoding_name(m) for m in PRELOADED_MODELS}
    assert setup.loaded == preloaded == {"o200k_base"}


@pytest.mark.usefixtures("window_discovery")
async def test_closing_the_stack_closes_the_client_the_thread_and_discovery(
    tmp_path: Path,
) -> None:
    upstream = Upstream()  # never answers the model list
    async with AsyncExitStack() as stack:
        edge = await open_edge(stack, config(tmp_path, PLAIN), upstream, QUIET, 1)
        for _ in range(100):  # discovery runs in the background
            if upstream.urls:
                break
            await asyncio.sleep(0.01)
        assert upstream.urls == ["https://main.test/v1/models"]
        assert not upstream.closed
    assert upstream.cancelled  # the discovery still waiting did not outlive the edge
    assert upstream.closed
    offload = edge.curation.offload
    assert offload is not None
    with pytest.raises(RuntimeError):
        await offload.run(lambda: None)


async def test_a_summarizing_policy_gets_its_cache_even_before_a_route_names_it(
    tmp_path: Path, stack: AsyncExitStack
) -> None:
    """A reload or the policy header may pick it at any time."""
    with_summarizer = BASE.replace(
        "  plain: {curators: []}\n", "  plain: {curators: []}\n" + SUMMARIZING
    )
    edge = await open_edge(
        stack, config(tmp_path, PLAIN, base=with_summarizer), Upstream(), QUIET, 1
    )
    assert list(edge.caches) == [MEMORY]


async def test_the_edge_carries_the_processs_metrics(tmp_path: Path, stack: AsyncExitStack) -> None:
    cfg = config(tmp_path, PLAIN, base=BASE.replace("metrics: {enabled: false}", ""))
    seen = await stack.enter_async_context(open_observability(cfg))
    assert seen.metrics is not None
    edge = await open_edge(stack, cfg, Upstream(), seen, 1)
    assert edge.metrics is seen.metrics
    assert edge.observers == seen.observers


@pytest.mark.parametrize(
    ("routes", "flags"),
    [
        ((PLAIN,), (False, False)),
        ((BY_HEADER, PLAIN), (True, False)),
        ((BY_MODEL, PLAIN), (False, True)),
        ((BY_HEADER, BY_MODEL, PLAIN), (True, True)),
    ],
)
async def test_routing_flags_follow_the_routes_matches(
    tmp_path: Path, stack: AsyncExitStack, routes: tuple[str, ...], flags: tuple[bool, bool]
) -> None:
    edge = await open_edge(stack, config(tmp_path, *routes), Upstream(), QUIET, 1)
    assert (edge.route_by_headers, edge.route_by_model) == flags


async def test_serving_swaps_the_config_and_keeps_the_process_state(
    tmp_path: Path, stack: AsyncExitStack
) -> None:
    edge = await open_edge(stack, config(tmp_path, PLAIN), Upstream(), QUIET, 99)
    reloaded = config(tmp_path, BY_HEADER, BY_MODEL, PLAIN)
    setup = CurationSetup(reloaded, edge.curation.counter)
    caches = {MEMORY: object()}
    served = edge.serving(reloaded, setup, caches)  # type: ignore[arg-type]
    assert (served.config, served.curation, served.caches) == (reloaded, setup, caches)
    assert (served.route_by_headers, served.route_by_model) == (True, True)  # recomputed
    kept = ("loop", "client", "observers", "max_body_bytes", "metrics", "counterfactuals")
    for name in kept:
        assert getattr(served, name) is getattr(edge, name), name
    # The edge in-flight exchanges hold is untouched, and cannot be changed in place.
    with pytest.raises(dataclasses.FrozenInstanceError):
        edge.config = reloaded  # type: ignore[misc]
    assert (edge.route_by_headers, edge.route_by_model, dict(edge.caches)) == (False, False, {})


def test_preload_asks_for_every_preloaded_model() -> None:
    asked: list[str] = []

    class Counter:
        def encoder(self, model: str) -> object:
            asked.append(model)
            return object()

    preload(Counter())  # type: ignore[arg-type]
    assert asked == list(PRELOADED_MODELS)
