"""The per-worker state every request reads (`Edge`), and how the app's lifespan opens it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace

import httpx

from policies.summary_io import SummaryCache
from policies.tokens import TokenCounter
from proxy.config.loader import Config
from proxy.curation.plan import CurationSetup
from proxy.curation.thread import CurationThread
from proxy.observability.exchange import Observer, Tracer
from proxy.observability.metrics.families import Metrics
from proxy.observability.observers import Observability
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.upstream.client import UpstreamClient
from proxy.upstream.connect import open_client
from proxy.upstream.facts import UpstreamFacts

PRELOADED_MODELS = ("gpt-4o",)
"""Models whose encodings are loaded at startup: o200k_base, tiktoken's default. Others
(cl100k_base: ~30 MB, ~0.2 s) load off the event loop on the first request needing them."""


@dataclass(frozen=True, slots=True)
class Edge:
    """Per-process state the lifespan builds and every request reads."""

    config: Config
    loop: asyncio.AbstractEventLoop
    """The worker's event loop. Asking asyncio for it costs a getpid() system call, which
    measured ~5 us a request under load here, more than the rest of forwarding's setup."""
    client: UpstreamClient
    curation: CurationSetup
    observers: tuple[Observer, ...]
    max_body_bytes: int
    caches: Mapping[str, SummaryCache]
    """Summary caches shared by the config's summarizers (empty without any)."""
    route_by_headers: bool
    """Some route matches on headers, so requests no protocol curates need a header map."""
    route_by_model: bool
    """Some route matches on the model, so JSON bodies no protocol curates are sniffed for it."""
    metrics: Metrics | None = None
    """None when `metrics.enabled` is false."""
    counterfactuals: Counterfactuals = field(default_factory=Counterfactuals)
    """Each conversation's uncurated prompts, for the counterfactual cost (kept on reload)."""
    tracing: Tracer | None = None
    """Starts each request's span; None unless OpenTelemetry traces are on."""

    def serving(
        self, config: Config, curation: CurationSetup, caches: Mapping[str, SummaryCache]
    ) -> Edge:
        """This edge serving `config` (a reload): the client, observers and limits stay."""
        by_headers, by_model = _routing(config)
        return replace(
            self,
            config=config,
            curation=curation,
            caches=caches,
            route_by_headers=by_headers,
            route_by_model=by_model,
        )


def _routing(config: Config) -> tuple[bool, bool]:
    """Whether routing needs headers, and the model of uncurated bodies: decided once per
    config rather than per request."""
    by_headers = any(r.match.headers for r in config.routes)
    return by_headers, any(r.match.model is not None for r in config.routes)


def preload(counter: TokenCounter) -> None:
    """Load the common encodings now, so no request pays for reading BPE files."""
    for model in PRELOADED_MODELS:
        counter.encoder(model)


async def open_edge(
    stack: AsyncExitStack,
    config: Config,
    transport: httpx.AsyncBaseTransport | None,
    seen: Observability,
    max_body_bytes: int,
) -> Edge:
    """The worker's Edge: tokenizers loaded, upstream client and summary caches opened on
    `stack` (closed with it)."""
    counter = TokenCounter(config.models, on_fallback=seen.tokenizer_fallback)
    offload = CurationThread(seen.turns)
    stack.callback(offload.close)
    await asyncio.to_thread(preload, counter)
    loaded = {counter.encoding_name(m) for m in PRELOADED_MODELS}
    client = await stack.enter_async_context(open_client(transport))
    facts = UpstreamFacts(seen.metrics.facts if seen.metrics is not None else None)
    facts.windows.refresh(client, config.upstreams.values())  # in the background
    stack.push_async_callback(facts.windows.close)
    caches: Mapping[str, SummaryCache] = {}
    if any(p.is_async for p in config.policies.values()):
        # Imported only when a policy summarizes: its redis client alone costs ~7 MB of
        # RSS in every worker.
        from proxy.summarizing.services import open_caches

        caches = await stack.enter_async_context(open_caches(config))
    by_headers, by_model = _routing(config)
    return Edge(
        config,
        asyncio.get_running_loop(),
        client,
        CurationSetup(config, counter, loaded, offload, facts),
        seen.observers,
        max_body_bytes,
        caches,
        route_by_headers=by_headers,
        route_by_model=by_model,
        metrics=seen.metrics,
        tracing=seen.tracing,
    )
