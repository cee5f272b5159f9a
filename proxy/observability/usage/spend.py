"""One chat exchange's spend: the upstream's usage, its cost, and the uncurated counterfactual.

Built once per exchange when its record is (`account`), then read by the metrics and the
audit log alike, so both always show the same figures.

What is cheap is done at once, on the event loop: the usage (`ExchangeRecord.usage`)
and the actual cost. The counterfactual is not: it needs every message of the uncurated
prompt keyed and counted (~3 ms for a 127k-token history), so it waits in `Deferred` until
a thread asks for it: the audit writer building the record, or the metrics' spend thread
(`proxy.observability.usage.counterfactual.SpendThread`). Both take exchanges in the order
they ended and the first to ask computes, so each conversation's history grows in order.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

import orjson

from policies.marks import CACHE_CONTROL
from policies.messages import Message
from policies.policy import tool_list
from policies.prefix_cache import Block, Prompt, message_blocks, tools_block
from policies.pricing import Price, PriceTable, Usage, cost
from policies.tokens import REPLY_PRIMING, TokenCounter
from proxy.observability.usage.attribution import CacheMiss
from proxy.observability.usage.cache_terms import cache_partition, count_scale, rebill_price
from proxy.observability.usage.conversation import SESSION_HEADER, conversation_key
from proxy.observability.usage.counterfactual import Attributed, Counterfactuals
from proxy.observability.usage.estimate import Estimate, estimate, reasoning_tokens
from proxy.observability.usage.sent_prompt import sent_prompt

SESSION_HEADER_BYTES = SESSION_HEADER.encode()
PRIMING_KEY = b"\0reply-priming"


@dataclass(frozen=True, slots=True)
class Sent:
    """What the exchange knows that spend needs (references, never copies)."""

    model: str | None
    body: Mapping[str, Any] | None
    original: Sequence[Message] | None
    session: str | None
    usage: Usage | None
    keys: Sequence[bytes | None] = ()
    """`original`'s digests, when curation made them (`ExchangeRecord.keys`)."""
    counts: Sequence[int] = ()
    """`original`'s tokens, when curation counted them (`ExchangeRecord.counts`)."""
    counted_sent: int | None = None
    """Our count of the prompt that went upstream (`proxy.upstream.facts.sent_tokens`)."""
    upstream: Sequence[Message] | None = None
    """The messages that went upstream, when they are not `original` (curated, enforced)."""
    passthrough: bool = False
    """No curator ran: `original` is what went upstream, so the uncurated cost is the
    actual one, and only the turn's cache attribution is worked out."""

    @classmethod
    def of(
        cls,
        model: str | None,
        body: Mapping[str, Any] | None,
        original: Sequence[Message] | None,
        headers: Sequence[tuple[bytes, bytes]],
        usage: Usage | None,
        keys: Sequence[bytes | None] = (),
        counts: Sequence[int] = (),
        counted_sent: int | None = None,
        upstream: Sequence[Message] | None = None,
        passthrough: bool = False,
    ) -> Sent:
        """From the exchange: the session header, and the usage the upstream reported."""
        raw = next((v for n, v in headers if n.lower() == SESSION_HEADER_BYTES), None)
        session = raw.decode("latin-1") if raw is not None else None
        measured = (keys, counts, counted_sent, upstream, passthrough)
        return cls(model, body, original, session, usage, *measured)


@dataclass(frozen=True, slots=True)
class Counterfactual:
    """The uncurated request: where it sits, what it would have cost."""

    conversation: str
    """The live history's key (`conversation_key`)."""
    session: str | None
    """The client's `x-session-id` (the audit record's `conversation` when set)."""
    uncurated: Usage | None
    """The uncurated prompt's tokens (as counted here), the cached tokens the prefix-cache
    model gives it in this conversation, and the output the request really produced."""
    uncurated_usd: float | None
    context_window: int | None
    encoding: str | None
    estimate: Estimate | None = None
    """Set when `uncurated.input` is an estimate (encrypted reasoning): its range."""
    range_usd: tuple[float, float] | None = None
    """`uncurated_usd` at the estimate's low and high ends."""
    cache: CacheMiss | None = None
    """Why this turn's cache missed, against its conversation's last turn (`attribution`)."""
    rebill_usd: float | None = None
    """What one re-billed token cost: the input price less the cached one (priced models)."""


class Deferred:
    """The counterfactual of one exchange, computed once, by whichever thread asks first."""

    __slots__ = ("_counter", "_history", "_lock", "_price", "_sent", "_value")

    def __init__(
        self, sent: Sent, counter: TokenCounter, history: Counterfactuals, price: Price | None
    ) -> None:
        self._sent, self._counter, self._history, self._price = sent, counter, history, price
        self._lock = threading.Lock()
        self._value: Counterfactual | None = None

    @property
    def ready(self) -> bool:
        """Whether the value is known (reading it then costs nothing)."""
        return self._value is not None

    def get(self) -> Counterfactual:
        if self._value is not None:
            return self._value
        with self._lock:
            if self._value is None:
                self._value = _counterfactual(self._sent, self._counter, self._history, self._price)
            return self._value


@dataclass(frozen=True, slots=True)
class Spend:
    """What one chat request cost, and (deferred) what it would have cost uncurated."""

    usage: Usage | None
    """As the upstream reported it; None when the response carried no usage."""
    price_model: str | None
    """The `prices:` glob that priced the model (the metrics' `model` label); None: unpriced."""
    actual_usd: float | None
    deferred: Deferred

    def counterfactual(self) -> Counterfactual:
        """Computes on first call: off the event loop, unless the exchange is small."""
        return self.deferred.get()


def account(
    sent: Sent,
    counter: TokenCounter,
    prices: PriceTable,
    history: Counterfactuals,
    now: bool = False,
) -> Spend:
    """The exchange's spend: usage and actual cost now, the counterfactual deferred (unless
    `now`, or there is nothing to count)."""
    found = prices.find(sent.model)
    price = found[1] if found is not None else None
    actual = cost(sent.usage, price) if price is not None and sent.usage is not None else None
    deferred = Deferred(sent, counter, history, price)
    if now or sent.original is None:  # no original: the uncurated request is the one sent
        deferred.get()
    return Spend(
        usage=sent.usage,
        price_model=found[0] if found is not None else None,
        actual_usd=actual,
        deferred=deferred,
    )


def _counterfactual(
    sent: Sent, counter: TokenCounter, history: Counterfactuals, price: Price | None
) -> Counterfactual:
    """Every request with messages joins its conversation's prefix-cache history, priced or
    not, so later requests are matched against it."""
    model = sent.model or ""
    original = sent.original or ()
    # Without messages nothing is matched against the history: the key matters only as
    # the client's session, so no digest is made.
    key = conversation_key(sent.session, original) if original or sent.session else ""
    uncurated, found, miss, explicit = None, None, None, False
    if original:
        tools = tool_list(sent.body or {})  # as the budget counts them: the same prompt
        measured = (sent.keys, sent.counts)
        last = isinstance((sent.body or {}).get(CACHE_CONTROL), dict)  # Anthropic's automatic
        prompt = uncurated_prompt(original, counter, model, tools, history, *measured, last)
        explicit = prompt.explicit
        cached, miss = _attribute(sent, prompt, counter, model, key, history, bool(tools))
        if not sent.passthrough:  # else the uncurated request is the one sent
            uncurated, found = _uncurated(sent, counter, model, prompt, cached)
    dollars, span = None, None
    if price is not None and sent.usage is not None:
        dollars = cost(uncurated or sent.usage, price)
        if found is not None and uncurated is not None:
            ends = (replace(uncurated, input=found.low), replace(uncurated, input=found.high))
            span = (cost(ends[0], price), cost(ends[1], price))
    window, encoding = history.memo((counter, model), lambda: _model_facts(counter, model))
    session = key if sent.session else None
    rebill = rebill_price(price, sent.usage, explicit)
    facts = (window, encoding, found, span, miss, rebill)
    return Counterfactual(key, session, uncurated, dollars, *facts)


def _attribute(
    sent: Sent,
    prompt: Prompt,
    counter: TokenCounter,
    model: str,
    key: str,
    history: Counterfactuals,
    tools: bool,
) -> tuple[int, CacheMiss]:
    """The client prompt's counterfactual cached tokens, and the turn's cache attribution."""
    upstream: Prompt = prompt
    origins: Sequence[int] = range(len(prompt.blocks))
    if sent.upstream is not None and sent.original is not None:
        upstream, origins = sent_prompt(prompt, sent.original, sent.upstream, counter, model)
    reported = sent.usage.cached if sent.usage is not None else None
    partition = cache_partition(sent.body)
    scale = count_scale(sent.usage, upstream)
    priced = not sent.passthrough
    turn = Attributed(prompt, upstream, origins, reported, tools, partition, scale, priced)
    return history.attribute(key, model, turn)


def _uncurated(
    sent: Sent, counter: TokenCounter, model: str, prompt: Prompt, cached: int
) -> tuple[Usage, Estimate | None]:
    """The uncurated prompt's usage (`cached`: its counterfactual reads), and the range of
    its count when it is an estimate."""
    output = sent.usage.output if sent.usage is not None else 0
    reasoning = sent.usage.reasoning if sent.usage is not None else 0
    found = _estimate(sent, counter, model, prompt.tokens)
    counted = prompt.tokens if found is None else found.value
    written, written_1h = _writes(sent.usage, counted - cached)
    return Usage(counted, cached, output, reasoning, written, written_1h), found


def _writes(usage: Usage | None, uncached: int) -> tuple[int, int]:
    """The cache writes of an uncurated prompt with `uncached` tokens past its cached prefix:
    the same share of them as the upstream wrote of the request's own (5-minute, 1-hour).
    The client's breakpoints decide what a provider writes, and they are the same in both."""
    if usage is None or not (usage.written or usage.written_1h):
        return 0, 0
    sent = max(usage.input - usage.cached, 1)
    share, share_1h = usage.written / sent, usage.written_1h / sent
    return round(max(uncached, 0) * share), round(max(uncached, 0) * share_1h)


def _estimate(sent: Sent, counter: TokenCounter, model: str, counted: int) -> Estimate | None:
    """The range of an uncurated prompt holding encrypted reasoning (None: it holds none)."""
    hidden = reasoning_tokens(sent.original or (), counter, model)
    if not hidden:
        return None
    billed = sent.usage.input if sent.usage is not None else None
    return estimate(counted, hidden, sent.counted_sent, billed)


def _model_facts(counter: TokenCounter, model: str) -> tuple[int | None, str | None]:
    """The window and encoding the proxy resolves for `model`."""
    if not model:
        return None, None
    return counter.models.lookup(model).context_window, counter.encoding_name(model)


def uncurated_prompt(
    messages: Sequence[Message],
    counter: TokenCounter,
    model: str,
    tools: Sequence[Mapping[str, Any]],
    history: Counterfactuals,
    keys: Sequence[bytes | None] = (),
    counts: Sequence[int] = (),
    automatic: bool = False,
) -> Prompt:
    """The prompt as `policies.prefix_cache.prompt_of` builds it (tools, each message, the
    reply priming), keyed by the counter's own message keys (one serialization, not two);
    with curation's `keys` and `counts` for every message, nothing is counted again."""
    blocks: list[Block] = []
    if tools:
        digest = history.tool_keys.get_or_compute(tools, b"", partial(_tools_digest, tools))
        size = history.memo((counter, model, digest), lambda: counter.count_tools(tools, model))
        blocks.append(tools_block(b"T" + digest, size, tools))
    if len(counts) == len(keys) == len(messages) and None not in keys:
        found, sizes = cast("Sequence[bytes]", keys), counts
    else:
        found, sizes = counter.measure(messages, model, known=keys)
    blocks.extend(message_blocks(found, sizes, messages, partial(_key, counter, model), automatic))
    blocks.append(Block(PRIMING_KEY, REPLY_PRIMING, width=0))
    return Prompt(tuple(blocks))


def _key(counter: TokenCounter, model: str, msg: Message) -> bytes:
    return counter.measure((msg,), model)[0][0]


def _tools_digest(tools: Sequence[Mapping[str, Any]]) -> bytes:
    return hashlib.blake2b(orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)).digest()[:16]
