"""priority.py: a background thread lowers its own priority, never the process's or the
event loop's; where it cannot (another system, a refused call) nothing changes."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

import pytest

from proxy import priority
from proxy.priority import MAX_NICE, lower_thread_priority

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def in_thread(fn: Callable[[], object]) -> object:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(10.0)
    return out[0]


@linux_only
def test_only_the_calling_thread_is_lowered() -> None:
    base = own_nice()

    def lower() -> tuple[int | None, int]:
        return lower_thread_priority(3), own_nice()

    assert in_thread(lower) == (min(MAX_NICE, base + 3),) * 2
    assert own_nice() == base
    assert os.getpriority(os.PRIO_PROCESS, 0) == base  # the process as a whole


@linux_only
def test_steps_stop_at_the_lowest_priority() -> None:
    assert in_thread(lambda: (lower_thread_priority(100), own_nice())) == (MAX_NICE, MAX_NICE)


def test_other_systems_keep_their_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(priority.sys, "platform", "darwin")
    monkeypatch.setattr(priority.os, "setpriority", lambda *a: calls.append(a))
    assert lower_thread_priority(5) is None
    assert calls == []


@linux_only
def test_a_refused_change_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise PermissionError("not allowed")

    monkeypatch.setattr(priority.os, "setpriority", refuse)
    assert lower_thread_priority(5) is None
