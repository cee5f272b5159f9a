"""The audit store's health as the writer reports it: ok or degraded since when, the backoff
between retries, each state change logged once, and the `/healthz` body built from it."""

from __future__ import annotations

import itertools
import logging
import threading
import time

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit.health import (
    BACKOFF_FIRST_S,
    BACKOFF_MAX_S,
    HealthDetail,
    StoreHealth,
    health_body,
)

LOGGER = "test.audit.health"


def health(**kwargs: float) -> StoreHealth:
    return StoreHealth(logging.getLogger(LOGGER), **kwargs)


class Audit:
    """Anything with `health()`, as `/healthz` sees the writer."""

    def __init__(self, detail: HealthDetail) -> None:
        self.detail = detail

    def health(self) -> HealthDetail:
        return self.detail


def test_a_new_store_is_ok() -> None:
    h = health()
    assert h.detail() == HealthDetail("ok", None, 0)


def test_the_first_failure_degrades_it_from_now_and_logs_one_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = health()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        before = time.time()
        wait = h.failed("postgres: connection refused", 12)
        after = time.time()
    assert wait == BACKOFF_FIRST_S == 0.5
    detail = h.detail()
    assert (detail.state, detail.failures) == ("degraded", 1)
    assert detail.since is not None
    assert before <= detail.since <= after
    assert [(r.levelno, r.name) for r in caplog.records] == [(logging.ERROR, LOGGER)]
    message = caplog.records[0].getMessage()
    assert "postgres: connection refused" in message
    assert "holding 12 records" in message


def test_later_failures_count_but_neither_log_nor_move_since(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = health()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        h.failed("down", 1)
        since = h.detail().since
        for _ in range(4):
            h.failed("still down", 1)
    assert h.detail() == HealthDetail("degraded", since, 5)
    assert len(caplog.records) == 1
    assert "still down" not in caplog.text


def test_the_default_backoff_doubles_from_half_a_second_to_thirty() -> None:
    h = health()
    waits = [h.failed("down", 0) for _ in range(9)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert BACKOFF_MAX_S == 30.0


def test_the_wait_reaches_the_cap_exactly_and_never_passes_it() -> None:
    h = health(first_s=1.0, max_s=4.0)
    assert [h.failed("down", 0) for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]


def test_the_wait_is_a_float_even_for_integer_settings() -> None:
    h = StoreHealth(logging.getLogger(LOGGER), first_s=1, max_s=3)
    waits = [h.failed("down", 0) for _ in range(3)]
    assert waits == [1.0, 2.0, 3.0]
    assert all(type(w) is float for w in waits)


def test_the_exponent_stops_growing_after_seventeen_failures() -> None:
    h = health(first_s=1.0, max_s=1e12)
    waits = [h.failed("down", 0) for _ in range(20)]
    assert waits[15] == 2.0**15
    assert waits[16] == 2.0**16  # the 17th failure: exponent 16, the last step
    assert waits[17:] == [2.0**16] * 3


def test_success_after_an_outage_logs_once_and_resets(caplog: pytest.LogCaptureFixture) -> None:
    h = health()
    for _ in range(3):
        h.failed("down", 5)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        h.succeeded(7)
        h.succeeded(2)  # healthy already: nothing to say
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "3 failed tries; 7 held records written" in caplog.records[0].getMessage()
    assert h.detail() == HealthDetail("ok")


def test_success_on_a_healthy_store_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    h = health()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        h.succeeded(100)
    assert caplog.records == []
    assert h.detail() == HealthDetail("ok")


def test_a_second_outage_starts_over(caplog: pytest.LogCaptureFixture) -> None:
    h = health(first_s=0.25, max_s=10.0)
    assert [h.failed("down", 0) for _ in range(3)] == [0.25, 0.5, 1.0]
    h.succeeded(0)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        assert h.failed("down again", 0) == 0.25
    assert h.detail().failures == 1
    assert len(caplog.records) == 1
    assert "down again" in caplog.records[0].getMessage()


def test_concurrent_failures_are_all_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = health()
    start = threading.Barrier(8)

    def fail() -> None:
        start.wait()
        for _ in range(200):
            h.failed("down", 0)

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        threads = [threading.Thread(target=fail) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert h.detail().failures == 1600
    assert len(caplog.records) == 1


@settings(max_examples=100, deadline=None)
@given(
    st.floats(0.001, 10.0),
    st.floats(0.0, 100.0),
    st.integers(1, 30),
)
def test_waits_start_at_the_first_step_never_shrink_and_never_pass_the_cap(
    first_s: float, extra_s: float, n: int
) -> None:
    max_s = first_s + extra_s
    h = health(first_s=first_s, max_s=max_s)
    waits = [h.failed("down", 0) for _ in range(n)]
    assert waits[0] == first_s
    assert all(a <= b for a, b in itertools.pairwise(waits))
    assert all(first_s <= w <= max_s for w in waits)
    assert h.detail().failures == n


# -- /healthz -----------------------------------------------------------------------------


def test_health_body_without_an_audit_or_with_a_healthy_one_is_the_bare_status() -> None:
    assert health_body(None) == b'{"status":"ok"}'
    assert health_body(Audit(HealthDetail("ok"))) == b'{"status":"ok"}'
    # An ok store says nothing more, whatever else its detail holds.
    assert health_body(Audit(HealthDetail("ok", 5.0, 2))) == b'{"status":"ok"}'


def test_health_body_shows_a_degraded_audit_with_its_since_and_tries() -> None:
    body = health_body(Audit(HealthDetail("degraded", 1_767_225_600.5, 4)))
    assert orjson.loads(body) == {
        "status": "ok",
        "audit": {"state": "degraded", "since": 1_767_225_600.5, "tries": 4},
    }
    assert body.startswith(b'{"status":"ok",')


def test_health_body_reports_a_live_store_health() -> None:
    h = health()
    audit = Audit(h.detail())
    assert health_body(audit) == b'{"status":"ok"}'
    h.failed("disk full", 3)
    h.failed("disk full", 3)
    audit.detail = h.detail()
    body = orjson.loads(health_body(audit))
    assert body["audit"]["state"] == "degraded"
    assert body["audit"]["tries"] == 2
    assert body["audit"]["since"] == h.detail().since


def test_since_and_the_outage_length_come_from_the_given_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1_000.0]
    h = StoreHealth(logging.getLogger(LOGGER), clock=lambda: now[0])
    h.failed("down", 0)
    assert h.detail().since == 1_000.0
    now[0] = 1_042.5
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        h.succeeded(3)
    assert "back after 42.5 s" in caplog.text
