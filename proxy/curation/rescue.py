"""Overflow rescue: a curated request the upstream rejects as too long is curated again,
tighter, and sent once more, before any byte reaches the client.

Our count is an estimate for most models, and the calibration learns only from answers;
so the first long request to a model that counts more, or a jump in what the upstream
counts, can still be answered 400 `context_length_exceeded`. The relay has not started
then (the client has no byte), so `RescuingClient` reads that error, asks the exchange's
`Retry` for a request curated to a budget tightened by what the error says, and sends it
instead. Only once: a second rejection reaches the client as the upstream wrote it.

How much tighter: OpenAI's and vLLM's messages state the window and the count
("maximum context length is 8192 tokens. However, your messages resulted in 8445
tokens", or "you requested 8445 tokens (7933 in the messages, 512 in the completion)";
vLLM's current wordings in `_PROMPT`; Anthropic's "prompt is too long: 208437 tokens >
200000 maximum", or "input length and `max_tokens` exceed context limit: 188240 + 21333 >
200000", in a 400 `invalid_request_error`). The upstream's prompt count over ours is the ratio
the retry's budget divides by (plus `TIGHTEN_MARGIN`); the stated window replaces ours. A
message without numbers, or whose count is only a lower bound ("your prompt contains at
least 7681 input tokens": vLLM stopped counting at the window), tightens by
`FALLBACK_TIGHTEN`. An exact count also teaches the calibration, and a stated window is
kept for the model (`UpstreamFacts.overflowed`), so its later requests fit from the start.

An error without a window ("Your input exceeds the context window of this model", the
Responses API's), on a model whose window was only assumed (128k: in no table, config or
model list), says only that the real window is below what was sent; 10% under 128k
usually cuts nothing (an Agents SDK run on an unlisted model failed at its third turn so).
Such a retry takes `halved`: half of what was refused (prompt plus reserved output) as its
window. A history grows a turn at a time, so the first refusal comes just past the real
window, and half of it fits any window at least that large. A fixed 8192 would fit nearly
every model too, but keep a quarter of what fits a 32k one; half the assumed window (64k)
cuts nothing on a request below it. A guess, so it is not kept for the model.

So does such an error on a prompt holding images whose size was guessed (by file id, a
remote URL: counted as the largest of their detail, `policies.image_parts`), whatever the
window: an upstream may count a screenshot at more than twice that (a request of 41
screenshots by file id was refused at 62k tokens by our count, and 10% under the window cut
nothing: the client got the 400).
"""

from __future__ import annotations

import logging
import math
import re
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import orjson

from policies.calibration import BudgetHints
from policies.image_parts import holds_guessed_images
from policies.summary_io import Services
from proxy.curation.plan import CurationSetup, Plan
from proxy.curation.replan import replan
from proxy.observability.exchange import ExchangeRecord, FirstAttempt
from proxy.types import Headers
from proxy.upstream.client import UpstreamClient, UpstreamRequest, UpstreamResponse
from proxy.upstream.facts import sent_tokens

log = logging.getLogger("curator.rescue")

MAX_ERROR_BYTES = 64 * 1024
"""A 400 body longer than this is not an overflow error: relayed without being read whole."""
TIGHTEN_MARGIN = 1.02
FALLBACK_TIGHTEN = 1.10
RESCUED_HEADER = b"x-curator-rescued"

_WINDOW = re.compile(
    rb"maximum context length is (\d+)"
    rb"|prompt is too long: \d+ tokens > (\d+) maximum"  # Anthropic
    rb"|exceed context limit: \d+ \+ \d+ > (\d+)"  # Anthropic, with max_tokens
)
_PROMPT = re.compile(
    rb"(\d+) in the messages"  # vLLM, older: "... (7933 in the messages, 512 in the ..."
    rb"|messages resulted in (\d+) tokens"  # OpenAI
    # vLLM: "However, your request has 33000 input tokens.", and with max_tokens too large
    # "... is too large: 4096. This model's maximum context length is 32768 tokens and your
    # request has 30000 input tokens (4096 > 32768 - 30000)."
    rb"|your request has (\d+) input tokens"
    # vLLM, newer: "However, you requested 512 output tokens and your prompt contains (at
    # least) 7681 input tokens, for a total of (at least) 8193 tokens."
    rb"|your prompt contains (?:at least )?(\d+) input tokens"
    rb"|prompt is too long: (\d+) tokens"  # Anthropic
    rb"|exceed context limit: (\d+) \+"  # Anthropic, with max_tokens
)
_AT_LEAST = re.compile(rb"prompt contains at least \d+ input tokens")
_REQUESTED = re.compile(
    rb"(?:requested|resulted in) (\d+) tokens|for a total of (?:at least )?(\d+) tokens"
)
_COMPLETION = re.compile(rb"is too large: (\d+)|exceed context limit: \d+ \+ (\d+)")


@dataclass(frozen=True, slots=True)
class Overflow:
    """What an upstream's context-length error says (None: it did not say)."""

    window: int | None
    prompt: int | None
    """The upstream's count of the prompt alone."""
    requested: int | None
    """The count it compared with the window (prompt, maybe plus the completion)."""
    at_least: bool = False
    """`prompt` is only a lower bound: the upstream stopped counting past the window."""


def overflow_in(body: bytes) -> Overflow | None:
    """The overflow a 400 body reports, None when it is another error."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = parsed.get("error", parsed) if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    text = message.encode() if isinstance(message, str) else b""
    window = _number(_WINDOW.search(text))
    if error.get("code") != "context_length_exceeded" and window is None:
        return None
    prompt = _number(_PROMPT.search(text))
    requested = _number(_REQUESTED.search(text))
    completion = _number(_COMPLETION.search(text))
    if requested is None and prompt is not None and completion is not None:
        requested = prompt + completion
    return Overflow(window, prompt, requested, _AT_LEAST.search(text) is not None)


def _number(found: re.Match[bytes] | None) -> int | None:
    if found is None:
        return None
    return int(next(g for g in found.groups() if g is not None))


def tightened(hints: BudgetHints, overflow: Overflow, ours: int) -> BudgetHints:
    """The hints for the retry: the stated window, and the budget divided by the ratio
    the upstream's count shows (and by `FALLBACK_TIGHTEN` when it showed none, or only a
    lower bound)."""
    counted = overflow.prompt or overflow.requested
    if counted is not None and ours > 0:
        margin = FALLBACK_TIGHTEN if overflow.at_least else TIGHTEN_MARGIN
        scale = max(hints.scale, counted / ours) * margin
    else:
        scale = hints.scale * FALLBACK_TIGHTEN
    return BudgetHints(overflow.window or hints.window, scale)


def halved(hints: BudgetHints, ours: int, reserve: int) -> BudgetHints:
    """The hints for a retry after an overflow that stated no window, on a model whose
    window was assumed: half of what was refused, the prompt (as the calibration expects
    the upstream to count it) plus the output reserved, is the window."""
    refused = math.ceil(ours * hints.scale) + reserve
    return BudgetHints(max(1, refused // 2), hints.scale)


Retry = Callable[[Overflow, bytes], Awaitable[UpstreamRequest | None]]
"""Given the overflow and the error body: the request to send instead, None to relay the
error as it is (the policy cannot do better)."""


class RescuingClient:
    """An `UpstreamClient` that turns one context-length 400 into a tighter retry."""

    __slots__ = ("_client", "_retry")

    def __init__(self, client: UpstreamClient, retry: Retry) -> None:
        self._client = client
        self._retry: Retry | None = retry

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        response = await self._client.send(request)
        retry, self._retry = self._retry, None  # once; and what it holds is freed after
        if response.status != 400 or retry is None:
            return response
        read = await _read_some(response)
        overflow = overflow_in(_decoded(read, response.headers)) if read.whole else None
        if overflow is not None:
            again = await retry(overflow, _decoded(read, response.headers))
            if again is not None:
                await response.aclose()
                return await self._client.send(again)
        return _Replay(response, read.body)


@dataclass(frozen=True, slots=True)
class _Read:
    body: bytes
    whole: bool


async def _read_some(response: UpstreamResponse) -> _Read:
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_ERROR_BYTES:
        chunk = await response.read()
        if not chunk:
            return _Read(b"".join(chunks), True)
        chunks.append(chunk)
        size += len(chunk)
    return _Read(b"".join(chunks), False)


def _decoded(read: _Read, headers: Headers) -> bytes:
    """The body as JSON text: a gzip/deflate error body (a client asked for it) inflated."""
    coding = next((v for n, v in headers if n.lower() == b"content-encoding"), b"").lower()
    if coding not in (b"gzip", b"deflate"):
        return read.body
    try:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        return inflater.decompress(read.body, MAX_ERROR_BYTES)
    except zlib.error:
        return b""


class _Replay:
    """The upstream's response with the bytes already read put back in front."""

    __slots__ = ("_prefix", "_response", "headers", "status")

    def __init__(self, response: UpstreamResponse, prefix: bytes) -> None:
        self._response = response
        self._prefix = prefix
        self.status = response.status
        self.headers = response.headers

    async def read(self) -> bytes:
        if self._prefix:
            prefix, self._prefix = self._prefix, b""
            return prefix
        return await self._response.read()

    async def aclose(self) -> None:
        await self._response.aclose()


async def retry_request(
    overflow: Overflow,
    error: bytes,
    *,
    planned: Plan,
    request: UpstreamRequest,
    setup: CurationSetup,
    services: Services | None,
    headers: list[tuple[bytes, bytes]],
) -> UpstreamRequest | None:
    """The exchange's `Retry`: `planned`'s request curated again to a tightened budget, its
    first attempt kept in the record, `headers` (the plan's, after the request id) replaced
    by the new plan's plus `x-curator-rescued`. None when curating again cannot help."""
    pending = planned.pending
    if pending is None:
        return None
    record, counter, facts = pending.record, setup.counter, setup.facts
    model = pending.wire.model or ""
    ours = sent_tokens(record.tokens_after or 0, record)
    upstream = pending.route.upstream
    if facts is not None and overflow.prompt is not None and not overflow.at_least:
        facts.learn(upstream, model, ours, overflow.prompt, counter.models)
    if facts is not None and overflow.window is not None:
        facts.overflowed(upstream, model, overflow.window)  # later requests start there
    first = FirstAttempt(record.curated, record.actions, record.tokens_after, error)
    hints = tightened(pending.hints, overflow, ours)
    if overflow.window is None and (pending.window_assumed or _images_guessed(overflow, record)):
        budget = pending.choice.policy.budget(pending.wire.facts, counter, pending.hints)
        hints = replace(halved(pending.hints, ours, budget.reserve_output), scale=hints.scale)
    again = await replan(pending, counter, hints, services, setup.offload)
    if facts is not None:
        facts.rescued(upstream, again is not None)
    if again is None:
        log.info("request %s: upstream overflow on %s; nothing more to cut", record.id, model)
        return None
    record.rescued = first
    headers[1:] = [*again.headers, (RESCUED_HEADER, b"1")]
    log.info(
        "request %s: upstream overflow on %s; curated again (%s -> %s tokens) and resent",
        record.id,
        model,
        first.tokens_after,
        record.tokens_after,
    )
    return replace(request, body=again.body)


def _images_guessed(overflow: Overflow, record: ExchangeRecord) -> bool:
    """An overflow stating no count, of a prompt holding images counted at a guessed size:
    how far off that guess was, nothing says (`halved`)."""
    return overflow.prompt is None and holds_guessed_images(record.curated or ())
