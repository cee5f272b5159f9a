"""`curator simulate`: what a policy would do to recorded requests, and what they would cost.

Each request is routed and curated as the proxy would (same `select_route`, same policy,
same token counter), then both sequences, as sent and as curated, are priced with
`policies.prefix_cache`. Offline: nothing is sent anywhere unless `--allow-calls` lets a
summarizer call its model; without it every summary is a clearly labelled placeholder.
`proxy.cli.simulate_input` reads INPUT; `proxy.cli.simulate_render` prints the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from policies.errors import ConfigError, ContextOverflow
from policies.loader import PRESET_PREFIX, load_preset
from policies.messages import Message
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.prefix_cache import PrefixCache, Pricer, prompt_of
from policies.summary_cache import MEMORY, MemoryCache
from policies.summary_io import Completion, Services, SummaryRequest, SummaryStats
from policies.tokens import TokenCounter
from proxy.cli.simulate_input import Request, SimulateError, stream_requests
from proxy.cli.simulate_json import render_json
from proxy.cli.simulate_model import Options, Priced, Report, SimulatedRequest
from proxy.cli.simulate_render import render_text
from proxy.cli.simulate_store import stored_requests
from proxy.cli.simulate_summary import render_summary, render_summary_json
from proxy.config.loader import Config
from proxy.protocols.chat import CHAT
from proxy.serving.routing import select_route

if TYPE_CHECKING:
    import httpx

    from proxy.upstream.client import UpstreamClient

Renderer = Callable[[Iterable[Priced], Report, Options], Iterator[str]]
PLACEHOLDER = "(placeholder from `curator simulate`: no model was called; pass --allow-calls)"


# -- policy choice and simulation ----------------------------------------------------------
def choose_policy(config: Config, options: Options, model: str) -> tuple[str | None, str, Policy]:
    """(route, policy name, policy): `--policy`, else `--route`'s, else the routed one."""
    if options.policy is not None:
        return None, options.policy, _named_policy(config, options.policy)
    if options.route is not None:
        route = next((r for r in config.routes if r.name == options.route), None)
        if route is None:
            known = ", ".join(r.name for r in config.routes)
            raise SimulateError(f"unknown route {options.route!r} (routes: {known})")
    else:
        route = select_route(config.routes, CHAT.path, model, {})
        if route is None:
            raise SimulateError(
                f"no route matches POST {CHAT.path} with model {model!r} and no headers; "
                "pass --route or --policy"
            )
    return route.name, route.policy, config.policies[route.policy]


def _named_policy(config: Config, name: str) -> Policy:
    if name in config.policies:
        return config.policies[name]
    if name.startswith(PRESET_PREFIX):
        try:
            return load_preset(name.removeprefix(PRESET_PREFIX), name=name)
        except ConfigError as exc:
            raise SimulateError(str(exc)) from None
    known = ", ".join(config.policies) or "none"
    raise SimulateError(f"unknown policy {name!r} (policies: {known}; or preset:<name>)")


def simulate(
    config: Config,
    options: Options,
    requests: Iterable[Request],
    services: Services,
    runner: asyncio.Runner,
) -> Iterator[Priced]:
    """Curate each request in order as it is read, and price it as sent and as curated
    with the prefix-cache model (after every request before it). What is held between
    requests: the token counter's and the summary cache's bounded caches, the pricers'
    tries (`Pricer`), and one policy per model."""
    counter = TokenCounter(config.models)
    models = RecordedModels(config.models)
    chosen: dict[str, tuple[str | None, str, Policy]] = {}  # by model: presets load once
    pricing = PrefixCache(cached_price=options.cached_price)
    original, curated = Pricer(pricing), Pricer(pricing)
    for request in requests:
        counter.models = models.seen(request)
        if options.model is not None:
            request = Request(request.line, {**request.body, "model": options.model})
        if request.model not in chosen:
            chosen[request.model] = choose_policy(config, options, request.model)
        route, name, policy = chosen[request.model]
        outcome = SimulatedRequest(
            request,
            route,
            name,
            policy.budget(request.body, counter),
            counter.count_messages(request.messages, request.model),
        )
        outcome = runner.run(_curate(outcome, policy, counter, services))
        model, tools = request.model, request.tools
        yield Priced(
            outcome,
            original.add(prompt_of(request.messages, counter, model, tools)),
            curated.add(prompt_of(outcome.curated, counter, model, tools)),
        )


class RecordedModels:
    """The config's `models`, with each model's window and encoding as the audit recorded
    them first: the proxy may have resolved them otherwise than this config would (another
    config, an upstream's own window). Learnt as the requests go by."""

    def __init__(self, models: ModelTable) -> None:
        self._models = models
        self._recorded: dict[str, ModelInfo] = {}
        self.table = models

    def seen(self, request: Request) -> ModelTable:
        """The table, with `request`'s model as recorded if it is the first to say."""
        if request.context_window is None or request.model in self._recorded:
            return self.table
        info = self._models.lookup(request.model)
        encoding = request.encoding or info.encoding
        self._recorded[request.model] = ModelInfo(
            request.context_window, info.max_input_tokens, encoding
        )
        exact = [(_literal_glob(model), info) for model, info in self._recorded.items()]
        self.table = ModelTable.with_overrides([*exact, *self._models.overrides])
        return self.table


def _literal_glob(name: str) -> str:
    """A glob matching exactly `name` (brackets, stars and question marks escaped)."""
    return "".join(f"[{c}]" if c in "[]*?" else c for c in name)


async def _curate(
    outcome: SimulatedRequest, policy: Policy, counter: TokenCounter, services: Services
) -> SimulatedRequest:
    """`outcome` with what the policy did, or why the proxy would not curate the request."""
    request = outcome.request
    if not request.messages:
        return replace(outcome, skipped="no_messages")
    # Stats are per request, as in the proxy; `complete` and the caches are shared.
    own = replace(services, stats=SummaryStats())
    try:
        result = await policy.acurate(request.messages, request.body, counter, services=own)
    except ContextOverflow as exc:
        return replace(outcome, rejected=f"400 context_length_exceeded: {exc}")
    except Exception as exc:  # the proxy fails open on a curator bug: show that, no traceback
        return replace(outcome, skipped=f"curator_error ({type(exc).__name__}: {exc})")
    return replace(outcome, result=result, summaries=own.stats if policy.is_async else None)


async def placeholder_complete(_prompt: list[Message], request: SummaryRequest) -> Completion:
    """The summary without --allow-calls, padded past `max_summary_tokens` (the summarizer
    cuts it there): token counts and costs then show a full-length summary, the worst case."""
    filler = "\n".join(" ".join(["placeholder"] * 12) for _ in range(request.max_tokens // 12 + 1))
    return Completion(f"{PLACEHOLDER}\n{filler}")


def calling_services(
    config: Config, client: UpstreamClient, environ: Mapping[str, str] | None = None
) -> Services:
    """Services whose `complete` is the proxy's own (`proxy.summarizing.services`): same
    request, header hygiene, error mapping and reply checks. An upstream's api_key is used
    when set; else $OPENAI_API_KEY stands in for the client's Authorization the proxy would
    pass on."""
    from proxy.summarizing.services import (
        build_complete,  # loads the redis client: only when calling
    )

    key = (os.environ if environ is None else environ).get("OPENAI_API_KEY")
    authorization = f"Bearer {key}".encode() if key else None

    async def complete(messages: list[Message], request: SummaryRequest) -> Completion:
        # No client request here: the stand-in credential is meant for the summarizer's own
        # upstream, the one the user asked simulate to call.
        call = build_complete(
            client,
            config.upstreams,
            authorization=authorization,
            authorization_for=request.upstream,
        )
        return await call(messages, request)

    return Services(complete=complete, caches={MEMORY: MemoryCache()})


# -- command -------------------------------------------------------------------------------
def run(
    config: Config, options: Options, *, transport: httpx.AsyncBaseTransport | None = None
) -> int:
    """`curator simulate`: print the report as it goes; on bad input, one line on stderr and
    status 1 (a bad line stops the run there, after the requests before it were shown)."""
    try:
        if options.store is not None:
            requests = stored_requests(options.store)
        else:
            requests = stream_requests(options.input)
        with asyncio.Runner() as runner, contextlib.ExitStack() as stack:
            services = _services(config, options, transport, runner, stack)
            priced = simulate(config, options, requests, services, runner)
            first = next(priced, None)  # an input with no request says so before any output
            stream = itertools.chain([] if first is None else [first], priced)
            report = Report(PrefixCache(cached_price=options.cached_price))
            for piece in _renderer(options)(stream, report, options):
                sys.stdout.write(piece)
    except SimulateError as exc:
        sys.stdout.flush()
        print(f"curator simulate: {exc}", file=sys.stderr)
        return 1
    return 0


def _renderer(options: Options) -> Renderer:
    if options.summary:
        return render_summary_json if options.json else render_summary
    return render_json if options.json else render_text


def _services(
    config: Config,
    options: Options,
    transport: httpx.AsyncBaseTransport | None,
    runner: asyncio.Runner,
    stack: contextlib.ExitStack,
) -> Services:
    if not options.allow_calls:
        return Services(complete=placeholder_complete, caches={MEMORY: MemoryCache()})
    from proxy.upstream.connect import open_client  # only --allow-calls needs a client

    opened = open_client(transport)
    client = runner.run(opened.__aenter__())
    stack.callback(lambda: runner.run(opened.__aexit__(None, None, None)))
    return calling_services(config, client)
