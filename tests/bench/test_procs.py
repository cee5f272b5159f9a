"""The benchmark's process ownership: whatever it started is stopped, together."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from bench import procs
from bench.procs import Processes

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def test_processes_that_ignore_sigterm_are_killed_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each gets the grace at once, not one after the other: four servers that each ignore
    SIGTERM are gone one grace later, not four."""
    monkeypatch.setattr(procs, "STOP_GRACE_S", 1.0)
    with Processes(tmp_path) as owned:
        started = [owned.start(f"stub-{i}", [sys.executable, "-c", STUBBORN]) for i in range(4)]
        time.sleep(0.5)  # each has set its handler
        begun = time.monotonic()
    took = time.monotonic() - begun
    assert all(proc.poll() is not None for proc in started)
    assert 1.0 <= took < 3.0
