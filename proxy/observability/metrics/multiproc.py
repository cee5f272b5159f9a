"""prometheus-client's multiprocess mode (`--workers N`): the shared directory's lifecycle.

The parent empties the directory before workers start; each scrape forgets the live gauges
of workers that no longer run; a worker that exits drops its own.
"""

from __future__ import annotations

import os
import re

from prometheus_client import multiprocess

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_multiprocess_dir(path: str) -> None:
    """Empty (or create) the multiprocess directory; call in the parent before workers start."""
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        if name.endswith(".db"):
            os.remove(os.path.join(path, name))


_LIVE_GAUGE_FILE = re.compile(r"gauge_live[a-z]*_(\d+)\.db")


def forget_dead_workers(path: str) -> None:
    """Drop the live gauges of worker processes that no longer run."""
    for name in os.listdir(path):
        match = _LIVE_GAUGE_FILE.fullmatch(name)
        if match is not None and not _running(int(match.group(1))):
            multiprocess.mark_process_dead(int(match.group(1)), path)  # type: ignore[no-untyped-call]


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    return True


def mark_worker_dead(pid: int) -> None:
    """Drop a dead worker's live gauges (its counters keep counting in the totals)."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
