"""RateLimitedLog: each kind of message at most once per interval, with a count of the rest."""

from __future__ import annotations

import logging

import pytest

from proxy.observability.audit.ratelog import RateLimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_message_per_kind_per_interval_then_the_count_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    say = RateLimitedLog(logging.getLogger("test.ratelog"), interval_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, "test.ratelog"):
        say("disk", logging.WARNING, "store unavailable: %s", "disk full")
        say("disk", logging.WARNING, "store unavailable: %s", "disk full")
        say("disk", logging.WARNING, "store unavailable: %s", "disk full")
        say("other", logging.WARNING, "another kind")
        clock.now += 61
        say("disk", logging.WARNING, "store unavailable: %s", "disk full")
    assert [r.getMessage() for r in caplog.records] == [
        "store unavailable: disk full",
        "another kind",
        "store unavailable: disk full (2 more like this since the last report)",
    ]
