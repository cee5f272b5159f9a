"""observability/metrics/multiproc.py on a real directory: which files each step removes.

Through `multiprocess_metrics` (emptying a configured directory) and a dead worker's
`gauge_livesum` next to a live one's are in test_families.py; here, the functions themselves:
every live gauge mode, the names that only look like one, a process of another user, and
`mark_worker_dead` with and without the shared directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.observability.metrics.multiproc import (
    MULTIPROC_ENV,
    forget_dead_workers,
    mark_worker_dead,
    prepare_multiprocess_dir,
)

LIVE_MODES = ("liveall", "livesum", "livemax", "livemin", "livemostrecent")
"""prometheus-client's gauge modes that describe only running processes."""


@pytest.fixture(scope="module")
def dead() -> int:
    """The pid of a process that has exited."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True
    )
    return int(child.stdout)


def touch(folder: Path, *names: str) -> None:
    for name in names:
        (folder / name).write_bytes(b"")


def test_prepare_creates_a_missing_directory_with_its_parents(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "prom"
    prepare_multiprocess_dir(str(path))
    assert path.is_dir()
    assert list(path.iterdir()) == []


def test_prepare_removes_only_db_files(tmp_path: Path) -> None:
    touch(tmp_path, "counter_1.db", "gauge_livesum_2.db", "histogram_3.db", "notes.txt", "x.db.bak")
    prepare_multiprocess_dir(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "x.db.bak"]


def test_every_live_gauge_mode_of_a_dead_worker_is_dropped(tmp_path: Path, dead: int) -> None:
    alive = os.getpid()
    touch(tmp_path, *(f"gauge_{mode}_{pid}.db" for mode in LIVE_MODES for pid in (dead, alive)))
    forget_dead_workers(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"gauge_{mode}_{alive}.db" for mode in LIVE_MODES
    )


def test_files_that_only_look_like_live_gauges_are_kept(tmp_path: Path, dead: int) -> None:
    kept = [
        f"gauge_all_{dead}.db",  # a mode that keeps dead processes' values on purpose
        f"gauge_max_{dead}.db",
        f"counter_{dead}.db",
        f"gauge_livesum_{dead}.db.tmp",
        f"gauge_livesum_{dead}x.db",
        f"gauge_LIVESUM_{dead}.db",
        "gauge_livesum_.db",
    ]
    touch(tmp_path, *kept)
    forget_dead_workers(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def test_a_process_of_another_user_counts_as_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead: int
) -> None:
    """os.kill(pid, 0) on someone else's process says EPERM: it exists, its gauges stay."""

    def not_yours(*_args: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    touch(tmp_path, f"gauge_livesum_{dead}.db")
    monkeypatch.setattr(os, "kill", not_yours)
    forget_dead_workers(str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == [f"gauge_livesum_{dead}.db"]


def test_mark_worker_dead_drops_its_live_gauges_and_keeps_its_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touch(tmp_path, "gauge_livesum_41.db", "gauge_liveall_41.db", "counter_41.db")
    touch(tmp_path, "gauge_livesum_42.db")
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    mark_worker_dead(41)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter_41.db", "gauge_livesum_42.db"]


@pytest.mark.parametrize("value", [None, ""])
def test_mark_worker_dead_without_a_shared_directory_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    """Single-process serving: there is no directory, and prometheus-client would fail on
    the missing path."""
    if value is None:
        monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    else:
        monkeypatch.setenv(MULTIPROC_ENV, value)
    monkeypatch.chdir(tmp_path)  # an empty value must not mean the current directory
    touch(tmp_path, "gauge_livesum_41.db")
    mark_worker_dead(41)
    assert [p.name for p in tmp_path.iterdir()] == ["gauge_livesum_41.db"]
