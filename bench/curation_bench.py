"""In-process timings of each preset's chain on the 127k-token request, per curator.

Run: `TIKTOKEN_CACHE_DIR=../shared/tiktoken .venv/bin/python -m bench.curation_bench`.
Prints medians, asserts nothing. The request is `large_request()` for a 32,768-token
window (what `bench.run --cases large` sends to the proxy), curated by `Policy.curate`:

- warm: the same body again, parsed afresh each time (so no object identity survives),
  with the counter's caches hot: compared with the orjson parse of the same body;
- cold: every message salted with a fresh nonce (`bench.salt`), so no cache helps:
  compared with tiktoken alone encoding the same body's text, the `bench.run` reference.

Per curator: each curator runs wrapped in a timer inside the real `Chain`, so the rows
add up to the run minus the chain's own work (shown as `chain (context, count before/after)`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from bench.conversations import large_request
from bench.salt import body_texts, with_nonce
from policies.base import CurationContext, Curator, CuratorOutput, TextCutter
from policies.chain import Chain
from policies.encoders import Encoder, load_tiktoken
from policies.loader import load_preset, preset_names
from policies.messages import Message
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.tokens import TokenCounter

MODEL = "bench-32k"
WINDOW = 32_768
ENCODING = "o200k_base"
CHAIN_ROW = "chain (context, count before/after)"


@dataclass(slots=True)
class _Clock:
    """Seconds per curator over the runs since the last `reset`."""

    spent: dict[str, float] = field(default_factory=dict)

    def reset(self) -> None:
        self.spent.clear()


@dataclass(frozen=True, slots=True)
class _Timed:
    """A curator that notes how long the one it wraps took."""

    name: ClassVar[str] = "timed"
    inner: Curator
    clock: _Clock

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        start = time.perf_counter()
        out = self.inner.curate(messages, ctx)
        spent = time.perf_counter() - start
        self.clock.spent[self.inner.name] = self.clock.spent.get(self.inner.name, 0.0) + spent
        return out


@dataclass(frozen=True, slots=True)
class _TimedCutter(_Timed):
    """A `_Timed` around a `TextCutter`, so the chain still profiles the texts it cuts."""

    limit: int

    def cuts_above(self) -> int:
        return self.limit


@dataclass(slots=True)
class Samples:
    """Milliseconds of each repetition: the whole run and each curator's share."""

    total: list[float] = field(default_factory=list)
    rows: dict[str, list[float]] = field(default_factory=dict)

    def add(self, total_s: float, clock: _Clock) -> None:
        self.total.append(total_s * 1e3)
        for name, spent in clock.spent.items():
            self.rows.setdefault(name, []).append(spent * 1e3)
        chain = total_s - sum(clock.spent.values())
        self.rows.setdefault(CHAIN_ROW, []).append(chain * 1e3)


def timed_policy(policy: Policy, clock: _Clock) -> Policy:
    """`policy` with each curator wrapped in a `_Timed`; pins and settings unchanged."""
    curators = tuple(
        _TimedCutter(c, clock, c.cuts_above()) if isinstance(c, TextCutter) else _Timed(c, clock)
        for c in policy.chain.curators
    )
    return Policy(
        policy.name,
        Chain(curators),
        policy.context_window,
        policy.reserve_output_tokens,
        policy.on_overflow,
        policy.pins,
    )


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def new_counter(encoder: Encoder) -> TokenCounter:
    table = ModelTable.with_overrides([(MODEL, ModelInfo(WINDOW, encoding=ENCODING))])
    counter = TokenCounter(table, loader=lambda _name: encoder)
    counter.preload(MODEL)
    return counter


def run_warm(policy: Policy, raw: bytes, counter: TokenCounter, repeat: int) -> Samples:
    clock = _Clock()
    timed = timed_policy(policy, clock)
    body = orjson.loads(raw)
    timed.curate(body["messages"], body, counter)  # heats the counter's caches
    samples = Samples()
    for _ in range(repeat):
        body = orjson.loads(raw)  # parsed just before, as the proxy does, but not timed
        clock.reset()
        start = time.perf_counter()
        timed.curate(body["messages"], body, counter)
        samples.add(time.perf_counter() - start, clock)
    return samples


def run_cold(
    policy: Policy, bodies: Sequence[bytes], counter: TokenCounter
) -> tuple[Samples, int, int]:
    """Samples, and the last run's tokens before and after."""
    clock = _Clock()
    timed = timed_policy(policy, clock)
    samples = Samples()
    before = after = 0
    for raw in bodies:
        body = orjson.loads(raw)
        clock.reset()
        start = time.perf_counter()
        result = timed.curate(body["messages"], body, counter)
        samples.add(time.perf_counter() - start, clock)
        before, after = result.tokens_before, result.tokens_after
    return samples, before, after


def tiktoken_alone_ms(encoder: Encoder, bodies: Sequence[bytes]) -> float:
    """Median time to encode every string a counter reads, as `bench.run` measures it."""
    times = []
    for raw in bodies:
        texts = body_texts(orjson.loads(raw))
        start = time.perf_counter()
        for text in texts:
            encoder.encode_ordinary(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def report(title: str, samples: Samples, reference: float, ref_name: str) -> None:
    total = statistics.median(samples.total)
    print(f"  {title:38s} {total:8.2f} ms  ({total / reference:5.2f}x {ref_name})")
    for name, values in samples.rows.items():
        ms = statistics.median(values)
        print(f"    {name:36s} {ms:8.3f} ms  ({ms / reference:5.2f}x)")


def salted_bodies(request: dict[str, Any], count: int) -> list[bytes]:
    run = f"{time.time_ns():x}"
    return [orjson.dumps(with_nonce(request, f"{run}-{k}")) for k in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--warm", type=int, default=40, help="warm repetitions")
    parser.add_argument("--cold", type=int, default=9, help="cold repetitions")
    parser.add_argument("--preset", action="append", help="only these presets (repeatable)")
    args = parser.parse_args()
    encoder = TokenCounter().encoder(MODEL)
    request = large_request(model=MODEL)
    raw = orjson.dumps(request)
    parse = median_ms(lambda: orjson.loads(raw), args.warm)
    cold_bodies = salted_bodies(request, args.cold)
    alone = tiktoken_alone_ms(load_tiktoken(encoder.name), cold_bodies)
    print(f"body {len(raw):,} bytes, {len(request['messages'])} messages, model {MODEL}")
    print(f"  counter's encoder: {encoder.name} ({type(encoder).__name__})")
    print(f"  orjson parse                       {parse:8.2f} ms")
    print(f"  tiktoken alone (cold reference)    {alone:8.2f} ms")
    for name in args.preset or preset_names():
        policy = load_preset(name)
        print(f"\n== {name} ==")
        warm = run_warm(policy, raw, new_counter(encoder), args.warm)
        cold, before, after = run_cold(policy, cold_bodies, new_counter(encoder))
        print(f"  tokens {before:,} -> {after:,}")
        report("warm", warm, parse, "parse")
        report("cold", cold, alone, "tiktoken")


if __name__ == "__main__":
    main()
