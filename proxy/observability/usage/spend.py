"""One chat exchange's spend: the upstream's usage, its cost, and the uncurated counterfactual.

Built once per exchange when its record is (`account`), then read by the metrics and the
audit log alike, so both always show the same figures.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from policies.messages import Message
from policies.prefix_cache import Block, Prompt
from policies.pricing import PriceTable, Usage, cost
from policies.tokens import REPLY_PRIMING, TokenCounter
from proxy.observability.usage.conversation import SESSION_HEADER, conversation_key
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.tap import ResponseTap

SESSION_HEADER_BYTES = SESSION_HEADER.encode()
PRIMING_KEY = b"\0reply-priming"


@dataclass(frozen=True, slots=True)
class Spend:
    """What one chat request cost, and what it would have cost uncurated."""

    conversation: str
    usage: Usage | None
    """As the upstream reported it; None when the response carried no usage."""
    price_model: str | None
    """The `prices:` glob that priced the model (the metrics' `model` label); None: unpriced."""
    actual_usd: float | None
    uncurated: Usage | None
    """The uncurated prompt's tokens (as counted here), the cached tokens the prefix-cache
    model gives it in this conversation, and the output the request really produced."""
    uncurated_usd: float | None
    context_window: int | None = None
    encoding: str | None = None


@dataclass(frozen=True, slots=True)
class Sent:
    """What the exchange knows that spend needs (references, never copies)."""

    model: str | None
    body: Mapping[str, Any] | None
    original: Sequence[Message] | None
    session: str | None
    usage: Usage | None

    @classmethod
    def of(
        cls,
        model: str | None,
        body: Mapping[str, Any] | None,
        original: Sequence[Message] | None,
        headers: Sequence[tuple[bytes, bytes]],
        tap: object,
    ) -> Sent:
        """From the exchange: the session header, and the usage the response tap read."""
        raw = next((v for n, v in headers if n.lower() == SESSION_HEADER_BYTES), None)
        session = raw.decode("latin-1") if raw is not None else None
        usage = tap.usage() if isinstance(tap, ResponseTap) else None
        return cls(model, body, original, session, usage)


def account(
    sent: Sent, counter: TokenCounter, prices: PriceTable, history: Counterfactuals
) -> Spend:
    """The exchange's spend. Every request with messages also joins its conversation's
    prefix-cache history, priced or not, so later requests are matched against it."""
    model = sent.model or ""
    original = sent.original or ()
    key = conversation_key(sent.session, original)
    uncurated = None
    if original:
        prompt = uncurated_prompt(original, counter, model, _tools(sent.body))
        cached = history.cached_tokens(key, prompt)
        output = sent.usage.output if sent.usage is not None else 0
        reasoning = sent.usage.reasoning if sent.usage is not None else 0
        uncurated = Usage(prompt.tokens, cached, output, reasoning)
    found = prices.find(model)
    actual = counterfactual = None
    if found is not None and sent.usage is not None:
        actual = cost(sent.usage, found[1])
        counterfactual = cost(uncurated, found[1]) if uncurated is not None else actual
    return Spend(
        conversation=key,
        usage=sent.usage,
        price_model=found[0] if found is not None else None,
        actual_usd=actual,
        uncurated=uncurated,
        uncurated_usd=counterfactual,
        context_window=counter.models.lookup(model).context_window if model else None,
        encoding=counter.encoding_name(model) if model else None,
    )


def uncurated_prompt(
    messages: Sequence[Message],
    counter: TokenCounter,
    model: str,
    tools: Sequence[Mapping[str, Any]],
) -> Prompt:
    """The prompt as `policies.prefix_cache.prompt_of` builds it (tools, each message, the
    reply priming), keyed by the counter's own message keys: the curation just computed
    them, so this costs one more lookup per message rather than another serialization."""
    blocks: list[Block] = []
    if tools:
        key = hashlib.blake2b(orjson.dumps(list(tools), option=orjson.OPT_SORT_KEYS))
        blocks.append(Block(b"T" + key.digest()[:16], counter.count_tools(tools, model)))
    keys, sizes = counter.measure(messages, model)
    blocks.extend(Block(k, n) for k, n in zip(keys, sizes, strict=True))
    blocks.append(Block(PRIMING_KEY, REPLY_PRIMING))
    return Prompt(tuple(blocks))


def _tools(body: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The request's tool definitions, as `policies.policy` counts them (legacy functions
    included), so the uncurated prompt is the one the budget saw."""
    if body is None:
        return []
    tools = body.get("tools")
    if isinstance(tools, list):
        return [t for t in tools if isinstance(t, Mapping)]
    functions = body.get("functions")
    if isinstance(functions, list):
        return [{"type": "function", "function": f} for f in functions if isinstance(f, Mapping)]
    return []
