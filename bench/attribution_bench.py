"""The bookkeeping thread's work per warm turn of a growing agent conversation: the spend's
counterfactual, which since the cache-miss attribution also compares the turn with the last.

Run: `python -m bench.attribution_bench [--turns N] [--rounds R]`.

Each turn of `bench.conversations.growing_requests` (the same message objects resent, as
agents do) is accounted as the proxy accounts it (`usage.spend.account`, then the
counterfactual the spend thread or audit writer computes), with curation's keys and counts
given, as the proxy gives them; every other turn curation replaced an early tool result with
a placeholder, so the upstream prompt is not the client's. What is timed is the
counterfactual alone, warm (the token counter has seen every message), per turn; the table
gives the median over the last half of the turns, per round. It runs on any tree: a tree
without the attribution just ignores the upstream messages.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

from bench.conversations import growing_requests
from policies.pricing import Price, PriceTable, Usage
from policies.tokens import TokenCounter
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.spend import Sent, account

MODEL = "gpt-4o"
PRICES = PriceTable.with_overrides([("gpt-4o*", Price(2.5, 1.25, 10.0))])


def turns_us(turns: int, counter: TokenCounter) -> list[float]:
    """Microseconds of each turn's counterfactual."""
    history = Counterfactuals()
    fields = {f.name for f in dataclasses.fields(Sent)}
    out = []
    for n, body in enumerate(growing_requests(3, turns, MODEL)):
        messages: list[Any] = body["messages"]
        keys, counts = counter.measure(messages, MODEL)  # curation's, warm
        upstream = None
        if n % 2 and len(messages) > 4:
            upstream = [*messages[:3], {**messages[3], "content": "[cut]"}, *messages[4:]]
        sent = Sent.of(MODEL, body, messages, [], Usage(input=sum(counts), cached=0, output=9))
        sent = dataclasses.replace(sent, keys=keys, counts=counts)
        if "upstream" in fields:
            sent = dataclasses.replace(sent, upstream=upstream)
        spend = account(sent, counter, PRICES, history)
        started = time.perf_counter()
        spend.counterfactual()
        out.append((time.perf_counter() - started) * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    counter = TokenCounter()
    turns_us(args.turns, counter)  # warms the counter's cache: every message counted once
    medians = []
    for _ in range(args.rounds):
        timed = turns_us(args.turns, counter)
        medians.append(statistics.median(timed[len(timed) // 2 :]))
    print(f"counterfactual per warm turn, median of rounds: {statistics.median(medians):.0f} us")
    print("rounds: " + ", ".join(f"{m:.0f}" for m in medians))


if __name__ == "__main__":
    main()
