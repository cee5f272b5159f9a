"""What the proxy learns about its upstreams, for the budget: their windows and their counts.

One `UpstreamFacts` per worker process, kept across reloads. It gives each request its
`BudgetHints` (the window the upstream's model list states, `proxy.upstream.models`, or
one an overflow error stated, `overflowed`; the calibration scale, `policies.calibration`),
says aloud when a model's window is only assumed (a warning once per model, a metric,
`x-curator-window: assumed`), and learns from the usage each curated response reports
(`learn`).

A window an overflow error stated (`proxy.curation.rescue`) is kept per (upstream, model),
so the model's later requests are curated to it from the start instead of overflowing and
being rescued every time. It beats the model list's, as the upstream's latest word, and
lives as long as the process; `MAX_STATED` keys at most, the least recently stated going
first, since clients choose model names.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from policies.calibration import NEUTRAL, BudgetHints, Calibration, Observation
from policies.models import ModelTable, bare_name
from policies.policy import Policy
from policies.tokens import TokenCounter
from proxy.observability.exchange import ExchangeRecord
from proxy.observability.metrics.labels import OTHER
from proxy.protocols.anthropic.counting import claude_hints
from proxy.protocols.base import Usage
from proxy.upstream.models import UpstreamWindows

log = logging.getLogger("curator.models")

WINDOW_HEADER = b"x-curator-window"
ASSUMED = b"assumed"
MAX_WARNED = 256
"""Models warned about once each; past this many the warnings stop (the metric goes on)."""
MAX_MEMO = 4096
MAX_STATED = 256
"""(upstream, model) keys whose window an overflow error stated, kept at most."""


class FactsSink(Protocol):
    """Where what the facts see goes (the metrics)."""

    def calibrated(self, upstream: str, label: str, observation: Observation) -> None: ...

    def window_assumed(self, upstream: str) -> None: ...

    def rescued(self, upstream: str, retried: bool) -> None: ...


class UpstreamFacts:
    """Windows and calibration per (upstream, model), for one worker process."""

    __slots__ = (
        "_memo_table",
        "_stated",
        "_table_memo",
        "_warned",
        "calibration",
        "sink",
        "windows",
    )

    def __init__(self, sink: FactsSink | None = None, calibration: Calibration | None = None):
        self.windows = UpstreamWindows()
        self.calibration = calibration or Calibration()
        self.sink = sink
        self._warned: set[str] = set()
        self._memo_table: ModelTable | None = None
        self._table_memo: dict[str, bool] = {}
        """Whether `_memo_table` knows each model name."""
        self._stated: dict[tuple[str, str], int] = {}
        """Windows overflow errors stated, oldest first (a dict keeps insertion order)."""

    def hints(
        self, upstream: str, model: str, claude: Mapping[str, str] | None = None
    ) -> BudgetHints:
        """The budget's hints; for a Messages request (`claude`: its headers), Claude's
        (`proxy.protocols.anthropic.counting`)."""
        window = self._stated.get((upstream, model)) or self.windows.window(upstream, model)
        scale = self.calibration.scale(upstream, model)
        if claude is not None:
            known = self.calibration.known(upstream, model)
            return claude_hints(BudgetHints(window, scale), claude, known)
        if window is None and scale == 1.0:
            return NEUTRAL
        return BudgetHints(window, scale)

    def assumed(
        self, upstream: str, model: str, policy: Policy, models: ModelTable, hints: BudgetHints
    ) -> bool:
        """Whether the budget runs on the default window because nobody knows the model's
        (no policy `context_window`, no `models:` entry, no upstream, not in the table);
        said once per model in the log, and every time to the metrics."""
        if policy.context_window is not None or hints.window is not None:
            return False
        if self._known(models, model):
            return False
        if model not in self._warned and len(self._warned) < MAX_WARNED:
            self._warned.add(model)
            log.warning(
                "model %r on upstream %s: its context window is unknown (no models: entry, "
                "not in the upstream's model list, not in the built-in table); assuming "
                "%d tokens",
                model,
                upstream,
                models.lookup(model).context_window,
            )
        if self.sink is not None:
            self.sink.window_assumed(upstream)
        return True

    def _known(self, models: ModelTable, model: str) -> bool:
        """`models.find(model) is not None`, memoized: matching every glob of the table
        costs tens of microseconds, and this runs on every curated request."""
        if models is not self._memo_table:  # a reload brought a new table
            self._memo_table, self._table_memo = models, {}
        known = self._table_memo.get(model)
        if known is None:
            if len(self._table_memo) >= MAX_MEMO:
                self._table_memo.clear()  # clients pick model names: keep it bounded
            known = self._table_memo[model] = models.find(model) is not None
        return known

    def learn(
        self, upstream: str, model: str, ours: int, theirs: int | None, models: ModelTable
    ) -> Observation | None:
        """One response's prompt count (`theirs`) against our count of what we sent."""
        if theirs is None:
            return None
        observation = self.calibration.observe(upstream, model, ours, theirs)
        if observation is not None and self.sink is not None:
            self.sink.calibrated(upstream, self.model_label(upstream, model, models), observation)
        return observation

    def model_label(self, upstream: str, model: str, models: ModelTable) -> str:
        """A metric label for `model`: the upstream's own id for it, else the glob it
        matched in the config or the table, else `other` (never free client input)."""
        if self.windows.window(upstream, model) is not None:
            return bare_name(model)
        return models.pattern(model) or OTHER

    def overflowed(self, upstream: str, model: str, window: int) -> None:
        """The window an overflow error of `upstream` stated for `model`: its later requests
        get it in their hints (see the module docstring)."""
        if window <= 0:
            return
        key = (upstream, model)
        self._stated.pop(key, None)  # re-inserted: the most recent goes last
        self._stated[key] = window
        if len(self._stated) > MAX_STATED:
            del self._stated[next(iter(self._stated))]

    def rescued(self, upstream: str, retried: bool) -> None:
        """An upstream overflow on a curated request: curated again and resent, or not."""
        if self.sink is not None:
            self.sink.rescued(upstream, retried)


def sent_tokens(messages_tokens: int, record: ExchangeRecord) -> int:
    """Our count of a curated prompt: its messages (reply priming included) and its tool
    definitions, as the budget counted them (in their chat form, whatever the protocol)."""
    return messages_tokens + record.tools_tokens


def learn(
    facts: UpstreamFacts, record: ExchangeRecord, counter: TokenCounter, usage: Usage | None
) -> None:
    """Teach the calibration what the upstream counted (`usage`, from the response's tail)
    for a curated request that it answered in full."""
    if record.status != 200 or record.skip_reason is not None or record.upstream is None:
        return
    # What went upstream: the curated list in enforce, the client's own in shadow.
    counted = record.tokens_before if record.mode == "shadow" else record.tokens_after
    if counted is None or record.mode == "off":
        return
    if usage is None or usage.input_tokens is None:
        return  # e.g. a stream without stream_options.include_usage
    model = record.model or ""
    ours = sent_tokens(counted, record)
    facts.learn(record.upstream, model, ours, usage.input_tokens, counter.models)
