"""Money: what a request cost, from the token usage the upstream reported and a price table.

A price is in US dollars per million tokens, three of them per model: uncached input,
cached input and output. Output includes reasoning tokens: providers count reasoning in
`completion_tokens` / `output_tokens` and bill it at the output price.

    cost = (input - cached) * input_price + cached * cached_input_price + output * output_price

The counterfactual is the same formula applied to the uncurated prompt, with the cached
tokens the provider's prefix cache would have given it (`policies.prefix_cache`) and the
output the request really produced (curation does not change what the model says back
in this model; it changes what it reads).

The built-in table holds list prices of common OpenAI models as known when it was
written; they are defaults, and a config's `prices:` section overrides them.
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


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one request, as the upstream reported it.

    `cached` is part of `input`; `reasoning` is part of `output`.
    """

    input: int = 0
    cached: int = 0
    output: int = 0
    reasoning: int = 0


def cost(usage: Usage, price: Price) -> float:
    """What a request cost in US dollars (cached tokens never exceed the input)."""
    cached = min(max(usage.cached, 0), max(usage.input, 0))
    uncached = max(usage.input, 0) - cached
    dollars = uncached * price.input + cached * price.cached_input + usage.output * price.output
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
