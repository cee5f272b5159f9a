"""exchange.py: request ids (shape, time order), `ExchangeRecord.usage`, the summarizer-call
recorder `recording()`, and `notify()` keeping a failing observer from the others."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.messages import Message
from policies.summary_io import Completion, SummaryRequest
from proxy.observability import exchange
from proxy.observability.exchange import (
    ExchangeRecord,
    SummaryCall,
    new_id,
    notify,
    recording,
)
from proxy.protocols.base import Usage
from proxy.protocols.chat import CHAT
from tests.factories import audited, user

MS = 1_700_000_000_123
"""A time in milliseconds since the epoch (2023-11-14)."""


@dataclass
class Clock:
    """Stands in for the `time` module `exchange` reads: fixed wall time, scripted ticks."""

    ns: int = MS * 1_000_000 + 456_789
    wall: float = 1000.0
    ticks: Iterator[float] = field(default_factory=lambda: iter([5.0, 7.5, 10.0, 10.25]))

    def time_ns(self) -> int:
        return self.ns

    def time(self) -> float:
        return self.wall

    def perf_counter(self) -> float:
        return next(self.ticks)


@dataclass
class Bits:
    """Stands in for the `random` module: the given bits, and what was asked of it."""

    value: int
    asked: list[int] = field(default_factory=list)

    def getrandbits(self, k: int) -> int:
        self.asked.append(k)
        return self.value


def id_at(ns: int, bits: int) -> str:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(exchange, "time", Clock(ns=ns))
        patch.setattr(exchange, "random", Bits(bits))
        return new_id()


# -- new_id ----------------------------------------------------------------------------


def test_an_id_is_the_time_in_milliseconds_then_80_random_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bits = Bits(0x0123_4567_89AB_CDEF_0F1E)
    monkeypatch.setattr(exchange, "time", Clock())
    monkeypatch.setattr(exchange, "random", bits)
    assert new_id() == "018bcfe5687b" + "0123456789abcdef0f1e"
    assert int("018bcfe5687b", 16) == MS  # sub-millisecond digits dropped
    assert bits.asked == [80]


@pytest.mark.parametrize(
    ("ns", "bits", "expected"),
    [
        (0, 0, "0" * 32),
        (999_999, 2**80 - 1, "0" * 12 + "f" * 20),  # under a millisecond: stamp 0
        (1_000_000, 0, "0" * 11 + "1" + "0" * 20),
        ((2**48 - 1) * 1_000_000, 2**80 - 1, "f" * 32),  # the last millisecond that fits
    ],
)
def test_id_boundaries(ns: int, bits: int, expected: str) -> None:
    assert id_at(ns, bits) == expected


def test_real_ids_are_32_lowercase_hex_digits_and_distinct() -> None:
    ids = {new_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(len(i) == 32 and i == i.lower() and int(i, 16) >= 0 for i in ids)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 2**48 - 2),
    st.integers(1, 10**6),
    st.integers(0, 2**80 - 1),
    st.integers(0, 2**80 - 1),
)
def test_a_later_millisecond_sorts_after_whatever_the_random_bits(
    ms: int, later: int, bits_a: int, bits_b: int
) -> None:
    """Ids decode to their stamp and bits, and sort by time as text."""
    first = id_at(ms * 1_000_000, bits_a)
    second = id_at(min(ms + later, 2**48 - 1) * 1_000_000, bits_b)
    assert (int(first[:12], 16), int(first[12:], 16)) == (ms, bits_a)
    assert len(first) == len(second) == 32
    assert first < second


# -- ExchangeRecord --------------------------------------------------------------------


USAGE_TAIL = (
    b'data: {"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,'
    b'"prompt_tokens_details":{"cached_tokens":64}}}\n\ndata: [DONE]\n\n'
)


def test_usage_is_read_from_the_tail_by_the_records_protocol() -> None:
    record = audited(tail=USAGE_TAIL)
    assert record.protocol is CHAT
    assert record.usage() == Usage(input_tokens=120, cached_tokens=64, output_tokens=30)


def test_usage_is_none_without_a_protocol_or_a_tail() -> None:
    assert ExchangeRecord("r", 0.0, "GET", "/v1/models", tail=USAGE_TAIL).usage() is None
    assert audited(tail=b"").usage() is None
    assert audited(tail=b'{"id":"x","choices":[]}').usage() is None  # no usage reported


def test_usage_passes_the_whole_tail_to_the_protocol() -> None:
    seen: list[bytes] = []

    class Protocol:
        def usage(self, tail: bytes) -> Usage:
            seen.append(tail)
            return Usage(output_tokens=len(tail))

    record = ExchangeRecord("r", 0.0, "POST", "/x", protocol=Protocol(), tail=b"abc")  # type: ignore[arg-type]
    assert record.usage() == Usage(output_tokens=3)
    assert seen == [b"abc"]
    record.tail = b""
    assert record.usage() is None
    assert seen == [b"abc"]  # an empty tail is not even looked at


def test_a_new_record_holds_nothing_but_what_it_was_given() -> None:
    record = ExchangeRecord("r1", 12.5, "POST", "/v1/chat/completions")
    assert (record.route, record.protocol, record.original, record.curated) == (
        None,
        None,
        None,
        None,
    )
    assert (record.keys, record.actions, record.summary_calls, record.tail) == ((), (), (), b"")
    assert (record.latency_s, record.outcome, record.status, record.subcall) == (
        0.0,
        "ok",
        None,
        None,
    )


def test_the_clients_authorization_is_never_in_a_records_repr() -> None:
    record = ExchangeRecord("r1", 0.0, "POST", "/x", authorization="Bearer sk-secret-1")
    assert record.authorization == "Bearer sk-secret-1"
    assert "sk-secret-1" not in repr(record)
    assert "authorization" not in repr(record)


# -- recording -------------------------------------------------------------------------


REQUEST = SummaryRequest(upstream="main", model="small", max_tokens=200, timeout_s=30.0)


def test_recording_returns_the_completion_and_records_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(exchange, "time", Clock())
    answer = Completion("A summary.", prompt_tokens=40, completion_tokens=5)
    asked: list[tuple[list[Message], SummaryRequest]] = []

    async def complete(messages: list[Message], request: SummaryRequest) -> Completion:
        asked.append((messages, request))
        return answer

    calls: list[SummaryCall] = []
    messages: list[Message] = [user("Summarize this.")]
    record = recording(complete, calls)

    async def run() -> Completion:
        return await record(messages, REQUEST)

    assert asyncio.run(run()) is answer
    assert asked == [(messages, REQUEST)]
    assert calls == [SummaryCall(1000.0, messages, REQUEST, answer, None, 2.5)]
    assert calls[0].messages is messages  # a reference, not a copy


@pytest.mark.parametrize("error", [ValueError("upstream said no"), asyncio.CancelledError()])
def test_a_failed_call_is_recorded_and_its_error_raised(
    monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    """A summarizer's timeout arrives as a cancellation: recorded too, then re-raised."""
    monkeypatch.setattr(exchange, "time", Clock())

    async def complete(_messages: list[Message], _request: SummaryRequest) -> Completion:
        raise error

    calls: list[SummaryCall] = []

    async def run() -> None:
        with pytest.raises(type(error)) as info:
            await recording(complete, calls)([user()], REQUEST)
        assert info.value is error

    asyncio.run(run())
    assert calls == [SummaryCall(1000.0, [user()], REQUEST, None, error, 2.5)]


def test_every_call_is_appended_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchange, "time", Clock())
    replies: Iterator[Completion | Exception] = iter([Completion("one"), ValueError("two")])

    async def complete(_messages: list[Message], _request: SummaryRequest) -> Completion:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    calls: list[SummaryCall] = []
    record = recording(complete, calls)

    async def run() -> None:
        await record([user("a")], REQUEST)
        with pytest.raises(ValueError, match="two"):
            await record([user("b")], REQUEST)

    asyncio.run(run())
    assert [(c.messages, c.completion, c.latency_s) for c in calls] == [
        ([user("a")], Completion("one"), 2.5),
        ([user("b")], None, 0.25),
    ]
    assert str(calls[1].error) == "two"


# -- notify ----------------------------------------------------------------------------


def test_every_observer_sees_the_record_in_order() -> None:
    seen: list[tuple[str, str]] = []
    record = audited(id="req-1")
    notify([lambda r: seen.append(("a", r.id)), lambda r: seen.append(("b", r.id))], record)
    assert seen == [("a", "req-1"), ("b", "req-1")]
    notify([], record)  # no observers: nothing to do


def test_a_failing_observer_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    def broken(_record: ExchangeRecord) -> None:
        raise KeyError("missing")

    record = audited(id="req-7")
    with caplog.at_level(logging.ERROR, logger="curator.record"):
        notify([lambda _r: seen.append("before"), broken, lambda _r: seen.append("after")], record)
    assert seen == ["before", "after"]
    (logged,) = caplog.records
    assert (logged.name, logged.levelno) == ("curator.record", logging.ERROR)
    assert logged.getMessage() == f"exchange observer {broken!r} failed on request req-7"
    assert logged.exc_info is not None
    assert isinstance(logged.exc_info[1], KeyError)


def test_an_interrupt_is_not_an_observer_failure() -> None:
    seen: list[str] = []

    def interrupted(_record: ExchangeRecord) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        notify([interrupted, lambda r: seen.append(r.id)], audited())
    assert seen == []
