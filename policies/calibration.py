"""Calibration: how the upstream's prompt count compares with ours, per (upstream, model).

Our count is exact for OpenAI's models and an estimate for the rest: another tokenizer, a
chat template that adds tokens per message or per tool. Every response reports what the
upstream counted (`usage.prompt_tokens`, the Responses API's `input_tokens`). `Calibration`
keeps, per key, the ratio upstream / ours for what we sent, and `Policy.budget` divides the
room it gives the prompt by it when the upstream counts more (`BudgetHints.scale`).

The estimator is the median of the last `WINDOW` log-ratios, each clipped to
[1 / `MAX_RATIO`, `MAX_RATIO`]; until `SETTLED` samples have arrived, the neutral ratio 1.0
takes part as one more sample. Why this one:
- neutral at first (no sample: 1.0), and a constant factor is learned in two requests
  (one sample: half way in log space; two agreeing samples: the factor itself);
- robust: one outlier moves a settled median no further than the sample next to it, and
  the clip bounds what any single sample can do before the window settles;
- bounded: `WINDOW` floats per key and at most `max_keys` keys (least recently updated
  go first), so clients choosing model names cannot grow it;
- an EWMA would let every outlier pull the estimate by its weight times its size, and a
  weight small enough to make that harmless learns slowly.

State is per process (each `--workers` worker learns on its own within a few requests),
on the event loop: `observe` is called there, and readers (planning, possibly in a worker
thread) only look up a float that is replaced whole.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass

WINDOW = 9
SETTLED = 2
MAX_RATIO = 2.0
MAX_KEYS = 64


@dataclass(frozen=True, slots=True)
class BudgetHints:
    """What the proxy knows about the upstream that the policy's budget should use."""

    window: int | None = None
    """The upstream's own context window for the model (`/v1/models`), None if unknown."""
    scale: float = 1.0
    """Upstream count / our count (>= 1.0): the prompt may use 1/scale of the room."""


NEUTRAL = BudgetHints()


@dataclass(frozen=True, slots=True)
class Observation:
    """One response's usage against our count, as `Calibration.observe` saw it."""

    ratio: float
    """The key's estimate after this sample."""
    error: float
    """Relative error of the estimate before this sample: predicted / reported - 1."""


class Calibration:
    """Per (upstream, model): a robust, bounded estimate of upstream count / our count."""

    __slots__ = ("_estimates", "_max_keys", "_max_ratio", "_samples", "_window")

    def __init__(
        self, *, window: int = WINDOW, max_keys: int = MAX_KEYS, max_ratio: float = MAX_RATIO
    ) -> None:
        if window < 1 or max_keys < 1 or max_ratio < 1.0:
            raise ValueError("window and max_keys must be >= 1, max_ratio >= 1.0")
        self._window = window
        self._max_keys = max_keys
        self._max_ratio = max_ratio
        self._samples: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._estimates: dict[tuple[str, str], float] = {}

    def __len__(self) -> int:
        return len(self._samples)

    def ratio(self, upstream: str, model: str) -> float:
        """The current estimate (1.0 before any sample)."""
        return self._estimates.get((upstream, model), 1.0)

    def known(self, upstream: str, model: str) -> bool:
        """Whether any sample has arrived for this key."""
        return (upstream, model) in self._estimates

    def scale(self, upstream: str, model: str) -> float:
        """What the budget applies: the estimate when the upstream counts more, else 1.0."""
        return max(1.0, self._estimates.get((upstream, model), 1.0))

    def observe(self, upstream: str, model: str, ours: int, theirs: int) -> Observation | None:
        """Learn from one response: `ours` is our count of the prompt we sent (messages and
        tool definitions), `theirs` the upstream's. None when either is not positive."""
        if ours <= 0 or theirs <= 0:
            return None
        key = (upstream, model)
        before = self._estimates.get(key, 1.0)
        error = before * ours / theirs - 1.0
        bound = math.log(self._max_ratio)
        sample = min(bound, max(-bound, math.log(theirs / ours)))
        samples = self._samples.get(key)
        if samples is None:
            samples = self._samples[key] = deque(maxlen=self._window)
            while len(self._samples) > self._max_keys:
                gone, _ = self._samples.popitem(last=False)
                self._estimates.pop(gone, None)
        else:
            self._samples.move_to_end(key)
        samples.append(sample)
        after = math.exp(_median([*samples, 0.0] if len(samples) < SETTLED else list(samples)))
        self._estimates[key] = after
        return Observation(after, error)


def _median(values: list[float]) -> float:
    values.sort()
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
