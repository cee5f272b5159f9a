"""Replay a 100-turn Claude-Code-shaped session (`bench.claude_session`) through each
preset against the strict caching fake, and price it with Anthropic's cache prices.

    python -m bench.claude_replay [--turns 100] [--window 200000] [--presets default,...]

Each request goes as the proxy sends it: parsed by the Messages protocol, curated by the
preset (the budget's window from `--window`), rebuilt with the client's breakpoints kept or
moved. The fake checks it as Anthropic would (`tests.fakes.anthropic_rules`: a refusal is
counted, never hidden) and caches prefixes as Anthropic does (`tests.fakes.anthropic_cache`,
one cache per strategy), reporting what each request read, wrote and paid in full.
`whole` is the session sent directly, unchanged.

Billed input is `input_tokens + 1.25 x cache writes (5 min) + 0.1 x cache reads`, in units
of one uncached input token, against `whole`'s. Per strategy: the first turn its request
differed from the client's (the first cut), and the turns after it whose cache reads fell
below `whole`'s on the same turn (the issue asks for none; but a curated prompt is smaller
than the whole one, so a turn that reads all of it but the newest step still reads fewer
tokens), and the turns that wrote more than `whole` did: the cache breaks, one per cut;
every other turn writes exactly the new step, as `whole` does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import tiktoken

from bench.claude_session import MODEL, session
from policies.calibration import BudgetHints
from policies.loader import load_preset
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.tokens import TokenCounter
from proxy.config.limits import Limits
from proxy.protocols.anthropic.protocol import ANTHROPIC
from tests.fakes.anthropic_cache import MessagesCache, block_tokens
from tests.fakes.anthropic_rules import Rejected, all_blocks, check

WHOLE = "whole"
PRESETS = ("default", "coding-agent", "chat")
WRITE, READ = 1.25, 0.1
Send = Callable[[bytes], bytes]
"""The client's request bytes -> what goes upstream."""


@dataclass(slots=True)
class Tally:
    """One strategy's session: per turn what the fake reported, and the refusals."""

    prompts: list[int] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)
    billed: list[float] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    first_cut: int | None = None


class Counts:
    """Each block's tokens as the fake counts them, memoized across turns and strategies."""

    def __init__(self) -> None:
        self._enc = tiktoken.get_encoding("cl100k_base")
        self._memo: dict[bytes, int] = {}

    def of(self, body: dict[str, Any]) -> list[int]:
        out = []
        for block in all_blocks(body):
            key = orjson.dumps(block, option=orjson.OPT_SORT_KEYS)
            if key not in self._memo:
                self._memo[key] = block_tokens(block, self._enc)
            out.append(self._memo[key])
        return out


def curating(policy: Policy, window: int) -> Send:
    counter = TokenCounter(ModelTable.with_overrides([(f"{MODEL}*", ModelInfo(window))]))
    hints = BudgetHints(window)
    limits = Limits()

    def send(raw: bytes) -> bytes:
        wire = ANTHROPIC.parse(raw, limits)
        result = policy.curate(wire.messages, wire.facts, counter, hints=hints)
        return ANTHROPIC.rebuild(wire, result.messages) if result.changed else raw

    return send


def replay(bodies: Sequence[bytes], send: Send, counts: Counts) -> Tally:
    tally, cache = Tally(), MessagesCache()
    for turn, raw in enumerate(bodies):
        sent = send(raw)
        if sent != raw and tally.first_cut is None:
            tally.first_cut = turn
        body = orjson.loads(sent)
        try:
            check(body)
        except Rejected as exc:
            tally.rejected.append(f"turn {turn}: {exc}")
        each = counts.of(body)
        usage = cache.usage(body, each)
        read, written = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
        tally.prompts.append(sum(each))
        tally.reads.append(read)
        tally.writes.append(written)
        tally.billed.append(usage["input_tokens"] + WRITE * written + READ * read)
    return tally


def replay_all(turns: int, window: int, presets: Sequence[str]) -> dict[str, Tally]:
    bodies = [orjson.dumps(b) for b in session(turns)]
    counts = Counts()
    out = {WHOLE: replay(bodies, lambda raw: raw, counts)}
    for name in presets:
        out[name] = replay(bodies, curating(load_preset(name), window), counts)
    return out


def reads_below(tally: Tally, whole: Tally) -> list[int]:
    """Turns after the first cut whose cache reads fell below the whole session's."""
    if tally.first_cut is None:
        return []
    pairs = zip(tally.reads, whole.reads, strict=True)
    return [t for t, (ours, theirs) in enumerate(pairs) if t > tally.first_cut and ours < theirs]


def writes_above(tally: Tally, whole: Tally) -> list[int]:
    """Turns whose cache writes exceeded the whole session's: the turns a cut broke the
    cache (every other turn writes only the new step, as the whole session does)."""
    pairs = zip(tally.writes, whole.writes, strict=True)
    return [t for t, (ours, theirs) in enumerate(pairs) if ours > theirs]


def table(results: dict[str, Tally]) -> str:
    whole = results[WHOLE]
    full = sum(whole.billed)
    lines = [
        "| strategy | billed input (vs whole) | cache reads | cache writes | largest prompt "
        "| first cut | turns after it reading fewer tokens than whole | turns writing more "
        "than whole (cache breaks) | refused |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in results.items():
        below, breaks = reads_below(t, whole), writes_above(t, whole)
        lines.append(
            f"| {name} | {sum(t.billed):,.0f} ({sum(t.billed) / full:.0%}) | {sum(t.reads):,} "
            f"| {sum(t.writes):,} | {max(t.prompts):,} "
            f"| {'-' if t.first_cut is None else t.first_cut} | {len(below)} | {len(breaks)} "
            f"| {len(t.rejected)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--window", type=int, default=200_000)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--per-turn", action="store_true", help="also print each turn's reads")
    args = parser.parse_args(argv)
    results = replay_all(args.turns, args.window, [p for p in args.presets.split(",") if p])
    print(table(results))
    if args.per_turn:
        for turn in range(args.turns):
            print(turn, *(f"{n}={t.reads[turn]}/{t.writes[turn]}" for n, t in results.items()))
    for name, t in results.items():
        for refusal in t.rejected:
            print(f"{name}: refused {refusal}", file=sys.stderr)
    return 1 if any(t.rejected for t in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
