"""Why a turn's cache missed: the first diverging element, whose change it was, what it cost.

Each request of a conversation is compared with the conversation's previous one, twice:
the prompt the client sent with the client's previous prompt, and the prompt that went
upstream with the previous upstream prompt (both as `policies.prefix_cache` blocks: the
tools, each message, the reply priming). With `cacheable` the provider's rounding
(1,024 tokens at least, then 128-token steps):

- expected = cacheable(the previous upstream prompt's tokens, reply priming left out): what
  the provider would credit had this turn only appended to the last one;
- predicted = cacheable(the tokens this upstream prompt shares with the previous one);
- reported = the cached (read) tokens the provider reported;
- re-billed = expected - reported (never below 0): tokens billed in full that the last
  turn had paid to cache.

The re-billed tokens are split by cause, in this order, each taking at most what is left:
`client` (what the client's own edit alone would lose: the previous upstream prompt's tokens
before the first upstream element derived from the client's first changed element), `expiry` (both
prefixes held up to the prediction, and the provider still credited fewer than predicted, by
more than `tolerance`: counts differ a little from the provider's), then `curation` (the
rest, when the upstream prefix moved where the client's did not). A turn with another
model than the last is all `model_change`, one under another `prompt_cache_key` all
`client` (distinct keys share no cache); a conversation's first turn is `first_turn`.

Where the client set breakpoints (`cache_control`: Anthropic) the provider caches only at
them (`policies.breakpoint_cache`), and `held` says what the last turn left: the longest
prefix of its upstream prompt ending at one of its breakpoints past the minimum, not every
token of it rounded down; a read is credited to the token, only within the lookback of a
breakpoint of this turn (a prefix out of reach is the client's: its breakpoints are too far
apart). Our counts of such prompts are estimates, so these figures are scaled by the
turn's own ratio of the upstream's count to ours (`Attributed.scale`).
"""

from __future__ import annotations

import itertools
import operator
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from policies.prefix_cache import MIN_CACHED_TOKENS, PrefixCache, Prompt
from proxy.observability.usage.breakpoints import Marks, marks_of

Cause = Literal["first_turn", "model_change", "client", "curation", "expiry", "none"]
CAUSES: tuple[Cause, ...] = ("first_turn", "model_change", "client", "curation", "expiry", "none")
"""Every cause, the metric's label values among them (the split keeps the last four)."""
SPLIT: tuple[Cause, ...] = ("model_change", "client", "expiry", "curation")
"""The causes re-billed tokens are split into, in the order they take their share."""
_KEY = operator.attrgetter("key")
_TOKENS = operator.attrgetter("tokens")
KEY_BYTES = 64
"""What a remembered block key costs (a 17-byte digest kept alive, its tuple slot)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """What one request leaves for the next of its conversation to compare with."""

    model: str
    client: tuple[bytes, ...]
    """The client prompt's block keys, reply priming left out."""
    upstream: tuple[bytes, ...]
    """The upstream prompt's (the same tuple when curation changed nothing)."""
    upstream_tokens: int
    """The upstream prompt's tokens, reply priming left out."""
    upstream_ends: array[int] = field(default_factory=lambda: array("q"))
    """The tokens of the upstream prompt's first i + 1 blocks, at i (8 bytes a block)."""
    tools: bool = False
    """Whether both prompts' first block is the tool definitions."""
    partition: str = ""
    """The client's `prompt_cache_key` ("": unset): distinct keys share no cache."""
    marks: Marks | None = None
    """Where the upstream prompt's breakpoints write and read (None: it has none, and the
    provider caches every prefix)."""

    @property
    def bytes(self) -> int:
        kept = len(self.client) + (0 if self.upstream is self.client else len(self.upstream))
        marks = 0 if self.marks is None else self.marks.bytes
        return kept * KEY_BYTES + len(self.upstream_ends) * self.upstream_ends.itemsize + marks

    def upstream_before(self, block: int) -> int:
        """The tokens of the upstream prompt's blocks before `block`."""
        ends = self.upstream_ends
        return 0 if block <= 0 else ends[min(block, len(ends)) - 1]


@dataclass(frozen=True, slots=True)
class Element:
    """A diverging element: the tools, or message `index` of the client's or upstream
    prompt; or the client's `prompt_cache_key`."""

    prompt: Literal["original", "curated"]
    kind: Literal["tools", "message", "prompt_cache_key"]
    index: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "element": self.kind, "index": self.index}


@dataclass(frozen=True, slots=True)
class CacheMiss:
    """One turn's attribution (the audit record's `cache` field)."""

    cause: Cause
    rebilled: Mapping[Cause, int]
    """Re-billed tokens by cause (the causes with none left out); they add up to the total."""
    expected: int
    predicted: int
    reported: int | None
    """None when the upstream reported no usage: the prediction stands in for it."""
    client_at: Element | None = None
    """The client prompt's first element that differs from its previous prompt's."""
    upstream_at: Element | None = None
    """The upstream prompt's first element that differs from the previous upstream prompt's."""

    @property
    def rebilled_tokens(self) -> int:
        return sum(self.rebilled.values())

    @property
    def diverged_at(self) -> Element | None:
        """The element that caused the miss: the client's for `client`, else the upstream's."""
        return self.client_at if self.cause == "client" else self.upstream_at

    def as_json(self, usd_per_token: float | None) -> dict[str, Any]:
        """The audit field: tokens (and dollars, when priced) by cause, and where it parted."""
        found = self.diverged_at
        out: dict[str, Any] = {
            "cause": self.cause,
            "diverged_at": found.as_json() if found is not None else None,
            "rebilled_tokens": self.rebilled_tokens,
            "rebilled": dict(self.rebilled),
            "expected": self.expected,
            "predicted": self.predicted,
            "reported": self.reported,
            "client_at": self.client_at.as_json() if self.client_at is not None else None,
            "upstream_at": self.upstream_at.as_json() if self.upstream_at is not None else None,
        }
        if usd_per_token is not None:
            out["rebilled_usd"] = {c: n * usd_per_token for c, n in self.rebilled.items()}
        return out


def turn_of(
    model: str,
    client: Prompt,
    upstream: Prompt,
    tools: bool,
    partition: str = "",
    min_tokens: int = MIN_CACHED_TOKENS,
) -> Turn:
    """What `client` and `upstream` leave for the next turn."""
    client_keys = tuple(map(_KEY, client.blocks[:-1]))  # C loops: ~340 blocks a turn
    upstream_keys = client_keys
    if upstream is not client:
        upstream_keys = tuple(map(_KEY, upstream.blocks[:-1]))
        if upstream_keys == client_keys:
            upstream_keys = client_keys  # one tuple kept, not two
    ends = array("q", itertools.accumulate(map(_TOKENS, upstream.blocks[:-1])))
    marks = marks_of(upstream.blocks[:-1], ends, min_tokens) if upstream.explicit else None
    total = ends[-1] if ends else 0
    return Turn(model, client_keys, upstream_keys, total, ends, tools, partition, marks)


@dataclass(frozen=True, slots=True)
class Held:
    """What the `last` turn left in the provider's cache that `now` can read."""

    last: Turn
    now: Turn
    cache: PrefixCache
    scale: float

    def upto(self, block: int, parted: int = 0) -> int:
        """The tokens of the longest held prefix of the last upstream prompt that ends
        before `block`; of those ending before `parted` (where both prompts are the same),
        only the ones a breakpoint of `now` reaches."""
        last, reach = self.last, self.now.marks
        if last.marks is None:
            return self.cache.cacheable(last.upstream_before(block))
        found = [
            p
            for p in last.marks.written
            if p < block and (p >= parted or (reach is not None and reach.reads(p)))
        ]
        return round(last.upstream_ends[max(found)] * self.scale) if found else 0


def tolerance(cache: PrefixCache, predicted: int) -> int:
    """A shortfall this small is the counts' disagreement with the provider's, not a miss:
    one caching step, plus 2% of the prediction."""
    return cache.increment + predicted // 50


def attribute(
    last: Turn | None,
    now: Turn,
    origins: Sequence[int],
    reported: int | None,
    cache: PrefixCache,
    scale: float = 1.0,
) -> CacheMiss:
    """This turn (`now`, each of its upstream blocks' client block index in `origins`)
    compared with the `last` of its conversation; `scale`: the upstream's count of an
    explicit prompt per token of ours."""
    if last is None:
        return CacheMiss("first_turn", {}, 0, 0, reported)
    held = Held(last, now, cache, scale)
    expected = held.upto(len(last.upstream))
    lost = max(expected - (reported or 0), 0)
    if last.model != now.model:
        return CacheMiss("model_change", _nonzero(model_change=lost), expected, 0, reported)
    if last.partition != now.partition:
        at = Element("original", "prompt_cache_key")
        return CacheMiss("client", _nonzero(client=lost), expected, 0, reported, at)
    client_at = _parting(last.client, now.client)
    upstream_at = _parting(last.upstream, now.upstream)
    predicted = held.upto(upstream_at, upstream_at)
    credited = predicted if reported is None else reported
    left = max(expected - credited, 0)
    kept = len(last.upstream)  # the client held: its own edit loses nothing
    if client_at < len(last.client):
        # Had curation held its prefix, the client's edit would part the upstream prompt at
        # the first block derived from it: what the last upstream prompt had before it stays.
        first = next((b for b, o in enumerate(origins) if o >= client_at), len(origins))
        kept = max(first, upstream_at)
    client = min(expected - held.upto(kept, upstream_at), left)
    short = predicted - credited
    expiry = min(short, left - client) if short > tolerance(cache, predicted) else 0
    moved = upstream_at < len(last.upstream) and upstream_at < kept
    curation = left - client - expiry if moved else 0
    rebilled = _nonzero(client=client, expiry=expiry, curation=curation)
    cause = _cause(rebilled, client_at < len(last.client), moved)
    return CacheMiss(
        cause,
        rebilled,
        expected,
        predicted,
        reported,
        _element(client_at, len(last.client), last.tools or now.tools, "original"),
        _element(upstream_at, len(last.upstream), last.tools or now.tools, "curated"),
    )


def _parting(before: tuple[bytes, ...], now: tuple[bytes, ...]) -> int:
    """The first block index where `now` leaves `before` (`len(before)`: it extends it)."""
    if now[: len(before)] == before:  # the usual turn, compared in C
        return len(before)
    for i, (a, b) in enumerate(zip(before, now, strict=False)):
        if a != b:
            return i
    return min(len(before), len(now))


def _element(
    at: int, before: int, tools: bool, prompt: Literal["original", "curated"]
) -> Element | None:
    """Block `at` as an element of the prompt (None: it extended the last one's `before`)."""
    if at >= before:
        return None
    if tools and at == 0:
        return Element(prompt, "tools")
    return Element(prompt, "message", at - 1 if tools else at)


def _cause(rebilled: Mapping[Cause, int], client_moved: bool, upstream_moved: bool) -> Cause:
    """The cause with the most re-billed tokens; with none, whose change parted the prompts."""
    if rebilled:
        return max(rebilled, key=lambda c: rebilled[c])
    if client_moved:
        return "client"
    return "curation" if upstream_moved else "none"


def _nonzero(**tokens: int) -> dict[Cause, int]:
    return {c: n for c, n in tokens.items() if n > 0}  # type: ignore[misc]
