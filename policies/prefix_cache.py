"""Prefix-cache pricing: what one conversation's requests cost when prompt prefixes are cached.

Providers keep the prompts they have recently seen (for minutes) and bill input tokens of a
prefix they already hold at a fraction of the normal price: OpenAI about 0.1 to 0.5
depending on the model, Anthropic 0.1 for cache reads. OpenAI caches only prefixes of at
least 1024 tokens, in 128-token steps beyond that. This is why curation must be prefix
stable: a cut that moves every turn turns cheap cached tokens back into full-price ones.

The model, on purpose no finer than what curation can change:
- A prompt is a sequence of blocks: the tool definitions (one block), each message, and the
  reply priming. Two prompts share a prefix as long as their leading blocks are identical.
- Request k's cached tokens are the longest prefix it shares with ANY earlier request of
  the sequence, rounded down to the increment, and zero below the minimum. A prompt whose
  client set breakpoints (`cache_control`) reads only what breakpoints wrote, as Anthropic
  does (`policies.breakpoint_cache`).
- Cost is in units of one uncached input token: uncached + cached * `cached_price`.
  Cache writes are free (OpenAI; Anthropic's 1.25x write premium is not modelled), and
  output tokens are left out, as curation does not change them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from policies import breakpoint_cache, params
from policies.breakpoint_cache import Edges, path, provider_blocks
from policies.marks import CACHE_CONTROL, marked, unmarked
from policies.messages import Message
from policies.tokens import REPLY_PRIMING, TokenCounter

DEFAULT_CACHED_PRICE = 0.1
MIN_CACHED_TOKENS = 1024
CACHE_INCREMENT = 128
_PRIMING_KEY = b"\0reply-priming"


@dataclass(frozen=True, slots=True)
class Block:
    """A piece of a prompt that is cached whole or not at all: a digest and its tokens."""

    key: bytes
    tokens: int
    mark: bool = False
    """Whether a client's breakpoint ends here (`policies.marks`)."""
    width: int = 1
    """The provider content blocks it stands for (`breakpoint_cache.provider_blocks`)."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A request as the prefix cache sees it: its blocks, in prompt order."""

    blocks: tuple[Block, ...]

    @property
    def tokens(self) -> int:
        return sum(b.tokens for b in self.blocks)

    @property
    def explicit(self) -> bool:
        """Whether the client set breakpoints: only they read and write the cache."""
        return any(b.mark for b in self.blocks)


def prompt_of(
    messages: Sequence[Message],
    counter: TokenCounter,
    model: str,
    tools: Sequence[Mapping[str, Any]] = (),
) -> Prompt:
    """The blocks of a chat request: tools, each message, then the reply priming.

    Its `tokens` equal `count_tools` plus `count_messages`, the request's prompt tokens.
    """
    blocks: list[Block] = []
    if tools:
        size = counter.count_tools(tools, model)
        blocks.append(tools_block(b"T" + _digest(list(tools)), size, tools))
    sizes = counter.count_each(messages, model)
    keys = (_message_key(m) for m in messages)
    blocks.extend(message_blocks(keys, sizes, messages, _message_key))
    blocks.append(Block(_PRIMING_KEY, REPLY_PRIMING, width=0))
    return Prompt(tuple(blocks))


def tools_block(key: bytes, tokens: int, tools: Sequence[Mapping[str, Any]]) -> Block:
    """The tool definitions as one block, marked when the client marked one of them."""
    mark = any(CACHE_CONTROL in t for t in tools if isinstance(t, Mapping))
    return Block(key, tokens, mark, max(1, len(tools)))


def message_blocks(
    keys: Iterable[bytes],
    sizes: Iterable[int],
    messages: Sequence[Message],
    key_of: Callable[[Message], bytes],
    last: bool = False,
) -> list[Block]:
    """A block for each message; with its breakpoint and provider width when the client
    marked any (checked once: most prompts carry none, and then neither matters). A marked
    message is keyed (`key_of`, as `keys` were made) without its marks, which are no part
    of what is cached. `last`: the request asks for a breakpoint on its last block
    (Anthropic's top-level `cache_control`)."""
    if not last and not any(marked(m) for m in messages):
        return [Block(k, n) for k, n in zip(keys, sizes, strict=True)]
    end = len(messages) - 1
    blocks = []
    for i, (k, n, m) in enumerate(zip(keys, sizes, messages, strict=True)):
        mark = marked(m)
        key = key_of(unmarked(m)) if mark else k
        blocks.append(Block(key, n, mark or (last and i == end), provider_blocks(m)))
    return blocks


def _message_key(msg: Message) -> bytes:
    return b"M" + _digest(msg)


def _digest(value: object) -> bytes:
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        # Not plain JSON (a library caller's own objects): repr is stable enough to compare.
        data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class RequestCost:
    """One request: its input tokens, how many of them were cached, and its cost in units."""

    input_tokens: int
    cached_tokens: int
    cost: float

    @property
    def hit_ratio(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


@dataclass(frozen=True, slots=True)
class SequenceCost:
    """Every request of a sequence, and their totals."""

    requests: tuple[RequestCost, ...]

    @property
    def input_tokens(self) -> int:
        return sum(r.input_tokens for r in self.requests)

    @property
    def cached_tokens(self) -> int:
        return sum(r.cached_tokens for r in self.requests)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.requests)

    @property
    def hit_ratio(self) -> float:
        total = self.input_tokens
        return self.cached_tokens / total if total else 0.0


@dataclass(frozen=True, slots=True)
class PrefixCache:
    """A provider's prefix-cache pricing: the cached price and the caching granularity."""

    cached_price: float = DEFAULT_CACHED_PRICE
    """The price of a cached input token, as a fraction of an uncached one."""
    min_tokens: int = MIN_CACHED_TOKENS
    increment: int = CACHE_INCREMENT

    def __post_init__(self) -> None:
        price = params.ratio("cached_price", self.cached_price, allow_zero=True)
        object.__setattr__(self, "cached_price", price)
        params.integer("min_tokens", self.min_tokens, minimum=1)
        params.integer("increment", self.increment, minimum=1)

    def cacheable(self, shared: int) -> int:
        """Tokens billed as cached when `shared` leading tokens match an earlier prompt."""
        if shared < self.min_tokens:
            return 0
        return self.min_tokens + (shared - self.min_tokens) // self.increment * self.increment

    def cost(self, input_tokens: int, cached_tokens: int) -> RequestCost:
        units = input_tokens - cached_tokens + cached_tokens * self.cached_price
        return RequestCost(input_tokens, cached_tokens, units)

    def price(self, prompts: Iterable[Prompt]) -> SequenceCost:
        """The cost of each prompt, sent in this order, each after all the earlier ones."""
        pricer = Pricer(self)
        return SequenceCost(tuple(pricer.add(prompt) for prompt in prompts))

    def cached(self, seen: Edges, written: set[int], prompt: Prompt) -> int:
        """`prompt`'s cached tokens after the prompts in `seen` (those of them a client's
        breakpoint wrote in `written`), which it joins."""
        if prompt.explicit:
            return breakpoint_cache.read(seen, written, prompt.blocks, self.min_tokens)
        return self.cacheable(path(seen, prompt.blocks)[1])


class Pricer:
    """`PrefixCache.price` one prompt at a time, for a sequence read as it goes (`curator
    simulate` streams): what it holds is the trie of block paths seen, one entry for each
    block that did not extend a known path (an agent's turn adds its new messages), and the
    nodes a client's breakpoint wrote."""

    __slots__ = ("_cache", "_seen", "_written")

    def __init__(self, cache: PrefixCache) -> None:
        self._cache = cache
        self._seen: Edges = {}
        self._written: set[int] = set()

    def add(self, prompt: Prompt) -> RequestCost:
        """The cost of `prompt`, sent after every prompt added before it."""
        cached = self._cache.cached(self._seen, self._written, prompt)
        return self._cache.cost(prompt.tokens, cached)
