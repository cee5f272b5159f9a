"""Money: what a request cost, from the token usage the upstream reported and a price table.

A price is in US dollars per million tokens, per model: uncached input, cached input
(a cache read), cache writes (5-minute, and 1-hour), and output. Output includes reasoning
tokens: providers count reasoning in `completion_tokens` / `output_tokens` and bill it at
the output price. Reads and writes are both parts of the input:

    cost = (input - cached - written - written_1h) * input_price + cached * cached_input_price
         + written * cache_write_price + written_1h * cache_write_1h_price
         + output * output_price

A price without cache-write prices bills writes as plain input (an upstream that does not
surcharge them); without a 1-hour price, 1-hour writes at the 5-minute one.

The counterfactual is the same formula applied to the uncurated prompt, with the cached
tokens the provider's prefix cache would have given it (`policies.prefix_cache`) and the
output the request really produced (curation does not change what the model says back
in this model; it changes what it reads).

The built-in table holds list prices of common OpenAI and Anthropic models as known when
it was written (dated in docs/cache.md); they are defaults, and a config's `prices:`
section overrides them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from policies.models import bare_name

PER_TOKENS = 1_000_000
"""Prices are per this many tokens."""


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float
    cached_input: float
    output: float
    cache_write: float | None = None
    """A 5-minute (or unspecified) cache write; None: billed as `input`."""
    cache_write_1h: float | None = None
    """A 1-hour cache write; None: billed as `cache_write`."""

    @property
    def write(self) -> float:
        return self.input if self.cache_write is None else self.cache_write

    @property
    def write_1h(self) -> float:
        return self.write if self.cache_write_1h is None else self.cache_write_1h


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one request, as the upstream reported it.

    `cached` (read from the cache), `written` and `written_1h` (written to it) are parts
    of `input`; `reasoning` is part of `output`.
    """

    input: int = 0
    cached: int = 0
    output: int = 0
    reasoning: int = 0
    written: int = 0
    written_1h: int = 0


def cost(usage: Usage, price: Price) -> float:
    """What a request cost in US dollars (reads and writes never exceed the input)."""
    left = max(usage.input, 0)
    cached = min(max(usage.cached, 0), left)
    left -= cached
    written_1h = min(max(usage.written_1h, 0), left)
    left -= written_1h
    written = min(max(usage.written, 0), left)
    left -= written
    dollars = (
        left * price.input
        + cached * price.cached_input
        + written * price.write
        + written_1h * price.write_1h
        + usage.output * price.output
    )
    return dollars / PER_TOKENS


MEMO_LIMIT = 1024
# (glob, price), most specific first: the first glob matching a model's bare name wins.
BUILTIN: tuple[tuple[str, Price], ...] = (
    ("gpt-4o-mini*", Price(0.15, 0.075, 0.60)),
    ("gpt-4o*", Price(2.50, 1.25, 10.00)),
    ("gpt-4.1-nano*", Price(0.10, 0.025, 0.40)),
    ("gpt-4.1-mini*", Price(0.40, 0.10, 1.60)),
    ("gpt-4.1*", Price(2.00, 0.50, 8.00)),
    ("gpt-5-nano*", Price(0.05, 0.005, 0.40)),
    ("gpt-5-mini*", Price(0.25, 0.025, 2.00)),
    ("gpt-5-pro*", Price(15.00, 15.00, 120.00)),
    ("gpt-5.1-codex-mini*", Price(0.25, 0.025, 2.00)),
    ("gpt-5.1*", Price(1.25, 0.125, 10.00)),
    ("gpt-5.2-pro*", Price(21.00, 21.00, 168.00)),
    ("gpt-5.2*", Price(1.75, 0.175, 14.00)),
    # GPT-5 itself, dated or not, and its -codex / -chat variants; never a later GPT-5.x
    # (each is priced on its own: a newer one without an entry is unpriced, not guessed).
    ("gpt-5", Price(1.25, 0.125, 10.00)),
    ("gpt-5-*", Price(1.25, 0.125, 10.00)),
    # Anthropic: reads at 0.1x input, 5-minute writes at 1.25x, 1-hour writes at 2x.
    ("claude-opus-4-5*", Price(5.00, 0.50, 25.00, 6.25, 10.00)),
    ("claude-opus-4*", Price(15.00, 1.50, 75.00, 18.75, 30.00)),
    ("claude-sonnet-4*", Price(3.00, 0.30, 15.00, 3.75, 6.00)),
    ("claude-3-7-sonnet*", Price(3.00, 0.30, 15.00, 3.75, 6.00)),
    ("claude-haiku-4-5*", Price(1.00, 0.10, 5.00, 1.25, 2.00)),
    ("claude-3-5-haiku*", Price(0.80, 0.08, 4.00, 1.00, 1.60)),
    ("claude-3-haiku*", Price(0.25, 0.03, 1.25, 0.30, 0.50)),
    ("o4-mini*", Price(1.10, 0.275, 4.40)),
    ("o3-mini*", Price(1.10, 0.55, 4.40)),
    ("o3*", Price(2.00, 0.50, 8.00)),
)


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Looks a model's price up: the config's entries first (in file order), then BUILTIN."""

    overrides: tuple[tuple[str, Price], ...] = ()
    _found: dict[str, tuple[str, Price] | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    """Lookups already made (every request asks; a model name is a handful of globs away)."""

    @classmethod
    def with_overrides(cls, overrides: Iterable[tuple[str, Price]]) -> PriceTable:
        return cls(tuple(overrides))

    def find(self, model: str | None) -> tuple[str, Price] | None:
        """(the glob that matched, its price), or None for a model without a price.

        The glob doubles as the `model` label of the cost metrics: it comes from the
        config or this table, never from a client, so the label's values stay bounded.
        """
        if not model:
            return None
        if model in self._found:
            return self._found[model]
        if len(self._found) >= MEMO_LIMIT:  # names come from clients: bound what is kept
            self._found.clear()
        found = self._found[model] = self._lookup(model)
        return found

    def _lookup(self, model: str) -> tuple[str, Price] | None:
        full, bare = model.strip().lower(), bare_name(model)
        for pattern, price in self.overrides:
            glob = pattern.lower()
            if fnmatchcase(full, glob) or fnmatchcase(bare, glob):
                return pattern, price
        for pattern, price in BUILTIN:
            if fnmatchcase(bare, pattern):
                return pattern, price
        return None

    def patterns(self) -> frozenset[str]:
        """Every glob a lookup can return."""
        return frozenset(p for p, _ in (*self.overrides, *BUILTIN))
