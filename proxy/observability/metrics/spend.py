"""The spend families: upstream-reported tokens and money, actual and uncurated.

Fed from each chat exchange's `Spend` (`proxy.observability.usage.spend`), streamed or not.
Tokens and the actual cost are counted on the event loop; the uncurated cost too when it is
known already (a passthrough, a small exchange: `ExchangeRecord.small`), else it is computed
and counted off the loop a moment later, by the spend thread (`SpendThread`) or, with the
audit on, the audit writer's thread it hands its jobs to (`SpendThread.share`). The `model` label
is the `prices:` glob that priced the request (`gpt-4o*`), `other` for a model without a
price: globs come from the config and the built-in table, never from a client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import Counter

from proxy.observability.metrics.labels import OTHER
from proxy.observability.metrics.loop import LoopCounter
from proxy.observability.usage.counterfactual import SpendThread
from proxy.observability.usage.spend import Spend

TOKEN_KINDS = ("input", "cached", "output", "reasoning", "cache_write", "cache_write_1h")
Child = Callable[..., Any]
"""`Metrics._child`: a family's labelled series, memoized."""


class SpendFamilies:
    """`curator_upstream_tokens_total`, `curator_cost_usd_total` and
    `curator_cache_miss_tokens_total`."""

    def __init__(
        self, loop_counter: Callable[..., LoopCounter], counter: Callable[..., Counter]
    ) -> None:
        self.tokens = loop_counter(
            "curator_upstream_tokens",
            "Tokens as the upstream reported them: input (cache reads and writes included), "
            "cached (read from the prompt cache), cache_write and cache_write_1h (written to "
            "it, 5-minute and 1-hour), output (reasoning included), reasoning",
            "route",
            "policy",
            "model",
            "kind",
        )
        # Updated from two threads (the loop, the spend thread): prometheus-client's own.
        self.cost = counter(
            "curator_cost_usd",
            "US dollars: actual (upstream usage at the configured prices) and uncurated "
            "(the request as the client sent it, under the same prefix-cache model)",
            "route",
            "policy",
            "model",
            "kind",
        )
        self.misses = counter(
            "curator_cache_miss_tokens",
            "Input tokens billed in full that the conversation's previous turn had cached, by "
            "cause: client (its own prompt changed), curation (ours moved where the client's "
            "held), expiry (both held; the provider credited less), model_change",
            "cause",
        )
        self.thread = SpendThread()

    def observe(self, child: Child, route: str, policy: str, spend: Spend) -> None:
        model = spend.price_model or OTHER
        usage = spend.usage
        if usage is not None:
            counts = (
                usage.input, usage.cached, usage.output, usage.reasoning,
                usage.written, usage.written_1h,
            )  # fmt: skip
            for kind, count in zip(TOKEN_KINDS, counts, strict=True):
                if count:
                    child(self.tokens, route, policy, model, kind).inc(count)
        if spend.actual_usd is not None:
            child(self.cost, route, policy, model, "actual").inc(spend.actual_usd)
        uncurated = child(self.cost, route, policy, model, "uncurated")

        def count_uncurated() -> None:
            found = spend.counterfactual()
            if found.uncurated_usd is not None:
                uncurated.inc(found.uncurated_usd)
            if found.cache is not None:
                for cause, tokens in found.cache.rebilled.items():
                    child(self.misses, cause).inc(tokens)

        if spend.deferred.ready:  # a passthrough: already known, no thread needed
            count_uncurated()
            return
        # Every exchange goes, priced or not: its prompt joins its conversation's history.
        self.thread.submit(count_uncurated)
