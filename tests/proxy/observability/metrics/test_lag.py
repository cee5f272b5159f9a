from __future__ import annotations

import asyncio
import time

from proxy.observability.metrics.lag import LAG_BUCKETS, LagMonitor
from proxy.observability.metrics.loop import HistogramChild


def test_a_stalled_loop_shows_as_lag_and_as_the_windows_max() -> None:
    histogram = HistogramChild(LAG_BUCKETS)
    maxima: list[float] = []

    async def run() -> None:
        monitor = LagMonitor(histogram, maxima.append, tick_s=0.005)
        monitor.start()
        await asyncio.sleep(0.05)  # idle: ticks come on time
        idle = max(maxima)
        time.sleep(0.08)  # what a big body curated on the loop does to everyone else
        await asyncio.sleep(0.05)
        monitor.stop()
        assert idle < 0.03
        assert 0.06 <= max(maxima) < 1.0

    asyncio.run(run())
    assert histogram.total >= 0.06
    assert sum(histogram.counts) >= 10


def test_the_max_is_over_the_window_only() -> None:
    maxima: list[float] = []
    monitor = LagMonitor(HistogramChild(LAG_BUCKETS), maxima.append, window_s=10)
    monitor.note(0.0, 0.2)
    monitor.note(5.0, 0.01)
    assert maxima[-1] == 0.2  # still within 10 s of the stall
    monitor.note(10.5, 0.003)
    assert maxima[-1] == 0.01  # the stall left the window; the next largest stays
    monitor.note(16.0, 0.002)
    assert maxima[-1] == 0.003
