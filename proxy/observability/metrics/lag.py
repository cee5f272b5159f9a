"""How late the event loop runs what is due: the proxy's head-of-line blocking, measured.

Every `TICK_S` the monitor asks the loop to call it back, and notes how much later than
asked the call came. Whatever held the loop in between (a big body curated on it, a
tokenizer, anything holding the GIL in another thread) delayed every other request by that
much too: small streaming turns wait behind it. `curator_event_loop_lag_seconds` is the
distribution of those delays; `curator_event_loop_lag_max_seconds` the largest in the last
`WINDOW_S`, a number an alert can watch. A stall shorter than a tick that falls between
two ticks is seen only in part: the figures are a floor on what requests waited.

A tick costs a few microseconds of the loop, 100 times a second: about 0.03% of a core.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from prometheus_client import Gauge
from prometheus_client.registry import CollectorRegistry

from proxy.observability.metrics.loop import HistogramChild, LoopHistogram

TICK_S = 0.01
WINDOW_S = 10.0
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class LagMonitor:
    """Measures the loop's lag while running (`start` on the loop, `stop` at exit)."""

    def __init__(
        self,
        histogram: HistogramChild,
        set_max: Callable[[float], None],
        *,
        tick_s: float = TICK_S,
        window_s: float = WINDOW_S,
    ) -> None:
        self._histogram = histogram
        self._set_max = set_max
        self._tick_s = tick_s
        self._recent: deque[tuple[float, float]] = deque()
        """(when, lag) of the ticks in the window whose lag no later tick's exceeds."""
        self._window_s = window_s
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._schedule(self._loop.time())

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self, now: float) -> None:
        assert self._loop is not None
        due = now + self._tick_s
        self._handle = self._loop.call_at(due, self._tick, due)

    def _tick(self, due: float) -> None:
        assert self._loop is not None
        now = self._loop.time()
        self.note(now, max(0.0, now - due))
        self._schedule(now)

    def note(self, now: float, lag: float) -> None:
        """Record one tick's lag; the window's maximum follows (a monotonic deque)."""
        self._histogram.observe(lag)
        recent = self._recent
        while recent and recent[-1][1] <= lag:
            recent.pop()
        recent.append((now, lag))
        while recent[0][0] < now - self._window_s:
            recent.popleft()
        self._set_max(recent[0][1])


class LagFamilies:
    """`curator_event_loop_lag_seconds` and `curator_event_loop_lag_max_seconds`."""

    def __init__(
        self,
        loop_histogram: Callable[[str, str, list[str], tuple[float, ...]], LoopHistogram],
        registry: CollectorRegistry,
    ) -> None:
        self.lag = loop_histogram(
            "curator_event_loop_lag_seconds",
            "How much later than due the event loop ran a timer (head-of-line blocking)",
            [],
            LAG_BUCKETS,
        )
        # With --workers N, the largest of the live workers' (the loop sets it 100x a
        # second: prometheus-client's lock costs nothing at that rate).
        self.lag_max = Gauge(
            "curator_event_loop_lag_max_seconds",
            f"The largest event loop lag in the last {WINDOW_S:g} seconds",
            registry=registry,
            multiprocess_mode="livemax",
        )

    def monitor(self) -> LagMonitor:
        return LagMonitor(self.lag.labels(), self.lag_max.set)
