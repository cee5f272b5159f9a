"""How late an event loop's ticks run beside busy background threads, and what taking turns
(`proxy.priority.Turns`) changes.

Run: `.venv/bin/python -m bench.turns_bench [--ticks N] [--cpu K]`. Prints, asserts nothing.

The loop sleeps 2 ms again and again and notes how late each wake-up ran, as the proxy's
loop-lag monitor does. Beside it run none, one or two threads that run Python without
pause at the curation thread's and the audit writer's nice levels, with the proxy's GIL
switch interval, all on one core (the bench pins a worker so): the loop against one busy
thread is the baseline; two busy threads free, then the same two taking turns in slices.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from contextlib import nullcontext

from proxy.priority import BOOKKEEPING_STEPS, CURATION_STEPS, Turns, lower_thread_priority
from proxy.serving.server import SWITCH_INTERVAL_S

TICK_S = 0.002
SLICE_S = 0.02
"""How long a busy thread keeps its turn: about a cold body's audit record."""
LATE_S = 0.005


def busy(stop: threading.Event, steps: int, turns: Turns | None) -> None:
    """Run Python until `stop`, in slices of SLICE_S (each in a turn, when given)."""
    lower_thread_priority(steps)
    x = 0
    while not stop.is_set():
        with turns if turns is not None else nullcontext():
            end = time.perf_counter() + SLICE_S
            while time.perf_counter() < end:
                x += sum(i * i for i in range(200))


async def lateness(ticks: int) -> list[float]:
    late = []
    for _ in range(ticks):
        start = time.perf_counter()
        await asyncio.sleep(TICK_S)
        late.append(time.perf_counter() - start - TICK_S)
    return sorted(late)


def run(threads: int, turns: Turns | None, ticks: int) -> list[float]:
    stop = threading.Event()
    steps = (CURATION_STEPS, BOOKKEEPING_STEPS)[:threads]
    started = [threading.Thread(target=busy, args=(stop, s, turns)) for s in steps]
    for thread in started:
        thread.start()
    try:
        return asyncio.run(lateness(ticks))
    finally:
        stop.set()
        for thread in started:
            thread.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=2000)
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.cpu})
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    print(f"loop ticks of {TICK_S * 1000:g} ms on CPU {args.cpu}, {args.ticks} each: how late")
    base = None
    for label, threads, turns in (
        ("one busy thread (baseline)", 1, None),
        ("two busy threads, free", 2, None),
        ("two busy threads, taking turns", 2, Turns()),
    ):
        late = run(threads, turns, args.ticks)
        p99 = late[int(len(late) * 0.99)] * 1000
        base = base or p99
        over = sum(t > LATE_S for t in late)
        print(
            f"  {label:32s} p50 {late[len(late) // 2] * 1000:5.2f} ms, p99 {p99:5.2f} ms "
            f"({p99 / base:4.1f}x), worst {late[-1] * 1000:5.2f} ms, "
            f"{over} over {LATE_S * 1000:g} ms ({over / len(late):.1%})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
