"""Replay one growing coding-agent conversation through curation strategies, and price it.

    python -m bench.replay [--turns N] [--window 32768] [--cached-price 0.1] [--seed S]
                           [--variants] [--json]

The conversation is `bench.conversations.growing_requests`: an agent resending its whole
history every turn, soon far beyond a `--window`-token model (a `models:` override of
gpt-4o). Each strategy decides what each request sends; `policies.prefix_cache` prices the
sequence the way providers bill it, cached prefixes at `--cached-price`. Strategies:

- full history: everything, as if the window did not exist. It would not fit; it is the
  reference (100%) the others are measured against.
- naive window: drop the oldest units (or messages) just enough to fit. Once the history
  outgrows the window the cut moves almost every turn, and each move re-sends everything
  after the system prompt at the full price.
- the shipped presets default, chat and coding-agent, loaded as operators load them.
- token_budget alone at several low_water values, to show what prefix stability buys.
- with `--variants`, the coding-agent preset without each of its curators in turn, to see
  what each one contributes (pins and tool-pair repair always stay).

For each: total cost relative to full history, mean input tokens, the cache hit ratio, and
how many requests a strict upstream would reject (invalid tool-call ordering, or more
prompt tokens than the window minus the reply reserve). Prints one table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.conversations import DEFAULT_MODEL, growing_requests
from policies.base import PinSpec
from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.invariants import ordering_errors
from policies.loader import load_preset
from policies.messages import Message, role, units
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.prefix_cache import DEFAULT_CACHED_PRICE, PrefixCache, Prompt, prompt_of
from policies.system import SystemPreservation
from policies.tokens import REPLY_PRIMING, TokenCounter

Body = dict[str, Any]
Strategy = Callable[[Body], list[Message]]
"""A request body -> the messages the upstream gets."""

PRESETS = ("default", "chat", "coding-agent")
LOW_WATERS = (1.0, 0.8, 0.6, 0.4)
TARGET_PRESET = "coding-agent"
TARGET_RATIO = 0.36
FULL = "full history (reference)"
NAIVE = "naive window (units)"
STRUCTURAL = ("system_preservation", "tool_pair_coherence")
"""Curators a variant never removes: they keep the output valid, they do not save tokens."""


@dataclass(frozen=True, slots=True)
class Row:
    """One strategy's result over the whole conversation."""

    strategy: str
    cost: float
    """In units of one uncached input token."""
    cost_ratio: float
    """`cost` relative to full history."""
    mean_input_tokens: float
    hit_ratio: float
    rejected: int


@dataclass(frozen=True, slots=True)
class Replay:
    """The conversation, the model it is sent to, and how that model's provider bills."""

    bodies: tuple[Body, ...]
    counter: TokenCounter
    pricing: PrefixCache

    def limit(self, body: Body) -> int:
        """Prompt tokens a strict upstream accepts: the window minus the reply reserve."""
        budget = Policy("limit").budget(body, self.counter)
        return budget.context_window - budget.reserve_output

    def budget(self, body: Body) -> int:
        return Policy("budget").budget(body, self.counter).messages

    def run(self, strategy: Strategy) -> tuple[list[Prompt], int]:
        """The prompt of every request as `strategy` sends it, and how many are rejected."""
        prompts: list[Prompt] = []
        rejected = 0
        for body in self.bodies:
            messages = strategy(body)
            prompt = prompt_of(messages, self.counter, body["model"], body["tools"])
            if ordering_errors(messages) or prompt.tokens > self.limit(body):
                rejected += 1
            prompts.append(prompt)
        return prompts, rejected


def setup(turns: int, window: int, cached_price: float, seed: int = 1) -> Replay:
    models = ModelTable.with_overrides([(DEFAULT_MODEL, ModelInfo(window, encoding="o200k_base"))])
    bodies = tuple(growing_requests(seed, turns, DEFAULT_MODEL))
    return Replay(bodies, TokenCounter(models), PrefixCache(cached_price=cached_price))


def strategies(replay: Replay, *, variants: bool = False) -> dict[str, Strategy]:
    """Every strategy the table compares, by the name it is shown under."""
    out: dict[str, Strategy] = {
        FULL: lambda body: list(body["messages"]),
        NAIVE: lambda body: naive_window(replay, body, by_unit=True),
        "naive window (messages)": lambda body: naive_window(replay, body, by_unit=False),
    }
    for preset in PRESETS:
        out[f"preset {preset}"] = _curating(replay, load_preset(preset))
    for low_water in LOW_WATERS:
        chain = Chain((SystemPreservation(), TokenBudget(low_water=low_water), ToolPairCoherence()))
        policy = Policy(f"token_budget low_water={low_water}", chain, pins=PinSpec())
        out[policy.name] = _curating(replay, policy)
    if variants:
        for policy in without_each(load_preset(TARGET_PRESET)):
            out[policy.name] = _curating(replay, policy)
    return out


def without_each(policy: Policy) -> list[Policy]:
    """`policy` without each of its curators in turn, but the structural ones."""
    curators = policy.chain.curators
    return [
        dataclasses.replace(
            policy,
            name=f"{policy.name} without {curator.name}",
            chain=Chain(curators[:i] + curators[i + 1 :]),
        )
        for i, curator in enumerate(curators)
        if curator.name not in STRUCTURAL
    ]


def _curating(replay: Replay, policy: Policy) -> Strategy:
    def curate(body: Body) -> list[Message]:
        return policy.curate(body["messages"], body, replay.counter).messages

    return curate


def naive_window(replay: Replay, body: Body, *, by_unit: bool) -> list[Message]:
    """Keep system messages; drop the oldest other units (or messages) until the rest fits.

    What a hand-rolled trimmer does. By message it orphans tool results, which a strict
    upstream rejects; by unit it stays valid. Either way the cut moves every turn.
    """
    messages: list[Message] = body["messages"]
    model = body["model"]
    sizes = replay.counter.count_each(messages, model)
    over = sum(sizes) + REPLY_PRIMING - replay.budget(body)
    groups = [range(u.start, u.stop) for u in units(messages)] if by_unit else None
    if groups is None:
        groups = [range(i, i + 1) for i in range(len(messages))]
    dropped: set[int] = set()
    for group in groups[:-1]:
        if over <= 0:
            break
        if any(role(messages[i]) == "system" for i in group):
            continue
        dropped.update(group)
        over -= sum(sizes[i] for i in group)
    return [m for i, m in enumerate(messages) if i not in dropped]


def replay_rows(
    replay: Replay, names: Sequence[str] | None = None, *, variants: bool = False
) -> list[Row]:
    """Run the strategies (all, or those named) and price each; full history always runs."""
    chosen = strategies(replay, variants=variants)
    if names is not None:
        chosen = {k: v for k, v in chosen.items() if k in (FULL, *names)}
    results = {name: replay.run(strategy) for name, strategy in chosen.items()}
    reference = replay.pricing.price(results[FULL][0]).cost
    rows: list[Row] = []
    for name, (prompts, rejected) in results.items():
        priced = replay.pricing.price(prompts)
        mean = priced.input_tokens / len(prompts) if prompts else 0.0
        ratio = priced.cost / reference if reference else 0.0
        rows.append(Row(name, priced.cost, ratio, mean, priced.hit_ratio, rejected))
    return rows


def table(rows: Sequence[Row], turns: int) -> str:
    header = ("strategy", "cost vs full", "mean input tokens", "cache hit ratio", "rejected")
    cells = [header] + [
        (
            r.strategy,
            f"{r.cost_ratio:.1%}",
            f"{r.mean_input_tokens:,.0f}",
            f"{r.hit_ratio:.1%}",
            f"{r.rejected}/{turns}",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(_cells(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cells(row: Sequence[str], widths: Sequence[int]) -> list[str]:
    """The strategy name left-aligned, the figures right-aligned."""
    return [
        c.ljust(w) if i == 0 else c.rjust(w)
        for i, (c, w) in enumerate(zip(row, widths, strict=True))
    ]


def target_met(rows: Sequence[Row]) -> bool:
    """coding-agent costs at most 36% of full history, less than the naive window, and no
    request of it is rejected."""
    by_name = {r.strategy: r for r in rows}
    target, naive = by_name[f"preset {TARGET_PRESET}"], by_name[NAIVE]
    return target.cost_ratio <= TARGET_RATIO and target.cost < naive.cost and not target.rejected


def verdict(rows: Sequence[Row]) -> str:
    by_name = {r.strategy: r for r in rows}
    target, naive = by_name[f"preset {TARGET_PRESET}"], by_name[NAIVE]
    return (
        f"target: preset {TARGET_PRESET} <= {TARGET_RATIO:.0%} of full history, under the "
        f"naive window, none rejected: {target.cost_ratio:.1%}, naive {naive.cost_ratio:.1%}, "
        f"{target.rejected} rejected -> {'met' if target_met(rows) else 'NOT MET'}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__)
    parser.add_argument("--turns", type=int, default=70, help="requests to replay (default 70)")
    parser.add_argument("--window", type=int, default=32_768, help="context window (32768)")
    parser.add_argument(
        "--cached-price",
        type=float,
        default=DEFAULT_CACHED_PRICE,
        help="price of a cached input token, as a fraction of an uncached one (default 0.1)",
    )
    parser.add_argument("--seed", type=int, default=1, help="conversation seed (default 1)")
    parser.add_argument(
        "--variants", action="store_true", help="add coding-agent without each curator in turn"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.turns < 1 or args.window < 1 or not 0 <= args.cached_price <= 1:
        parser.error("--turns and --window must be >= 1, --cached-price within [0, 1]")
    replay = setup(args.turns, args.window, args.cached_price, args.seed)
    rows = replay_rows(replay, variants=args.variants)
    if args.json:
        data = {"turns": args.turns, "window": args.window, "cached_price": args.cached_price}
        data |= {"rows": [asdict(r) for r in rows], "target_met": target_met(rows)}
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"{args.turns} requests of one coding-agent conversation, {args.window:,}-token window, "
        f"cached input at {args.cached_price:g} of the normal price"
    )
    print(table(rows, args.turns))
    print(verdict(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
