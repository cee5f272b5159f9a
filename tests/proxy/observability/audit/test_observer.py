"""The audit observer: what it submits for a finished exchange (the request's record, its
summarizer calls and a rescued attempt, linked by `parent_id`, in order), and what it skips."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Sequence
from typing import Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.base import Action
from policies.summary_io import Completion, SummaryRequest
from proxy.errors import ProxyError
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.observer import AuditObserver, rejected_attempt, summary_call
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.writer import AuditWriter
from proxy.observability.exchange import ExchangeRecord, FirstAttempt, SummaryCall
from proxy.protocols.chat import CHAT
from proxy.protocols.responses.protocol import RESPONSES
from tests.factories import audited
from tests.proxy.observability.audit.test_writer import WAIT, MemorySink

T0 = 1_767_225_600.0
AUTH = "Bearer sk-client-key"
HISTORY = [{"role": "user", "content": "Fix the failing test."}]
CUT = [{"role": "user", "content": "Fix it."}]
OVERFLOW = b'{"error":{"code":"context_length_exceeded"}}'
ID = re.compile(r"[0-9a-f]{32}")


class FakeWriter:
    """What the observer needs of the writer: `submit` and `queue_depth`."""

    def __init__(self, accept: bool = True) -> None:
        self.submitted: list[ExchangeRecord] = []
        self.accept = accept

    def submit(self, entry: ExchangeRecord) -> bool:
        self.submitted.append(entry)
        return self.accept

    def queue_depth(self) -> int:
        return len(self.submitted) + 100


def observer(writer: FakeWriter, depths: list[int] | None = None) -> AuditObserver:
    return AuditObserver(cast(AuditWriter, writer), None if depths is None else depths.append)


def request(**fields: Any) -> ExchangeRecord:
    values: dict[str, Any] = {
        "id": "req-1",
        "time": T0,
        "mode": "curated",
        "route": "agents",
        "policy": "coding",
        "model": "gpt-4o",
        "upstream": "openai",
        "authorization": AUTH,
        "original": HISTORY,
        "status": 200,
        "tokens_before": 900,
        "tokens_after": 400,
    }
    return audited(**(values | fields))


def call(
    started_at: float = T0 + 0.1,
    completion: Completion | None = None,
    error: BaseException | None = None,
    model: str = "gpt-4o-mini",
) -> SummaryCall:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Summarize: ..."}]
    req = SummaryRequest(upstream="openai", model=model, max_tokens=300, timeout_s=10.0)
    return SummaryCall(started_at, messages, req, completion, error, 0.25)


def first_attempt() -> FirstAttempt:
    action = Action("token_budget", "drop", (0,), 500, "over budget")
    return FirstAttempt(CUT, (action,), 450, OVERFLOW)


# -- what the observer submits ------------------------------------------------------------


def test_a_curated_exchange_submits_its_own_record_and_reports_the_depth() -> None:
    writer, depths = FakeWriter(), []
    record = request()
    observer(writer, depths)(record)
    assert len(writer.submitted) == 1
    assert writer.submitted[0] is record
    assert depths == [101]


def test_shadow_exchanges_are_audited_too() -> None:
    writer = FakeWriter()
    record = request(mode="shadow")
    observer(writer)(record)
    assert writer.submitted == [record]


@pytest.mark.parametrize(
    "change",
    [{"protocol": None}, {"mode": "off"}],
    ids=["no-protocol", "mode-off"],
)
def test_an_exchange_not_curated_submits_nothing_and_reports_no_depth(
    change: dict[str, Any],
) -> None:
    writer, depths = FakeWriter(), []
    record = dataclasses.replace(
        request(summary_calls=(call(),), rescued=first_attempt()), **change
    )
    observer(writer, depths)(record)
    assert writer.submitted == []
    assert depths == []


def test_summary_calls_then_the_rescued_attempt_then_the_request() -> None:
    writer, depths = FakeWriter(), []
    calls = (call(T0 + 0.1, Completion("short", 10, 2)), call(T0 + 0.2, error=TimeoutError()))
    record = request(summary_calls=calls, rescued=first_attempt())
    observer(writer, depths)(record)
    first, second, rescued, last = writer.submitted
    assert last is record
    assert [(r.subcall, r.parent_id) for r in writer.submitted] == [
        ("summary", "req-1"),
        ("summary", "req-1"),
        ("rescued", "req-1"),
        (None, None),
    ]
    assert (first.started_at, second.started_at) == (T0 + 0.1, T0 + 0.2)
    assert rescued.status == 400
    ids = [r.id for r in (first, second, rescued)]
    assert all(ID.fullmatch(i) for i in ids)
    assert len({*ids, record.id}) == 4
    assert depths == [104]  # told once, after all four were queued


def test_a_rescue_without_summaries_submits_two_records() -> None:
    writer = FakeWriter()
    record = request(rescued=first_attempt())
    observer(writer)(record)
    assert [r.subcall for r in writer.submitted] == ["rescued", None]


def test_without_a_depth_callback_it_still_submits() -> None:
    writer = FakeWriter()
    observer(writer)(request(summary_calls=(call(),)))
    assert [r.subcall for r in writer.submitted] == ["summary", None]


def test_a_full_queue_does_not_stop_the_rest_or_the_depth_report() -> None:
    writer, depths = FakeWriter(accept=False), []
    observer(writer, depths)(request(summary_calls=(call(),), rescued=first_attempt()))
    assert len(writer.submitted) == 3
    assert depths == [103]


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 5), st.booleans(), st.sampled_from(["curated", "shadow"]))
def test_every_call_made_on_its_behalf_comes_first_and_links_to_the_request(
    n_calls: int, rescued: bool, mode: str
) -> None:
    writer, depths = FakeWriter(), []
    calls = tuple(call(T0 + k) for k in range(n_calls))
    record = request(mode=mode, summary_calls=calls, rescued=first_attempt() if rescued else None)
    observer(writer, depths)(record)
    *behalf, last = writer.submitted
    assert last is record
    assert [r.subcall for r in behalf] == ["summary"] * n_calls + ["rescued"] * rescued
    assert [r.started_at for r in behalf[:n_calls]] == [T0 + k for k in range(n_calls)]
    assert all(r.parent_id == "req-1" for r in behalf)
    assert depths == [100 + n_calls + rescued + 1]


def test_the_observed_record_is_left_as_it_was() -> None:
    record = request(summary_calls=(call(),), rescued=first_attempt())
    before = dataclasses.replace(record)
    observer(FakeWriter(), [])(record)
    assert record == before


# -- the records made on the request's behalf ---------------------------------------------


def test_a_summary_call_is_a_chat_call_with_the_requests_route_policy_and_client() -> None:
    record = request(protocol=RESPONSES, kind="responses")
    done = call(completion=Completion("The user asked for a fix.", 120, 8))
    sub = summary_call(record, done)
    assert (sub.method, sub.path, sub.protocol) == ("POST", CHAT.path, CHAT)
    assert (sub.route, sub.policy, sub.authorization) == ("agents", "coding", AUTH)
    assert (sub.parent_id, sub.subcall, sub.mode) == ("req-1", "summary", None)
    assert sub.started_at == done.started_at
    assert sub.model == "gpt-4o-mini"
    assert sub.original is done.messages
    assert sub.latency_s == 0.25
    assert sub.upstream is None  # the summarizer's upstream is its own, not the route's
    assert (sub.summary_calls, sub.rescued) == ((), None)


def test_a_completed_summary_call_answers_200_in_chat_completion_shape() -> None:
    sub = summary_call(request(), call(completion=Completion("Short.", 120, 8)))
    assert sub.status == 200
    assert isinstance(sub.response, bytes)
    assert orjson.loads(sub.response) == {
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Short."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128},
    }


def test_a_completion_without_usage_reports_zero_tokens() -> None:
    sub = summary_call(request(), call(completion=Completion("Short.")))
    assert isinstance(sub.response, bytes)
    usage = orjson.loads(sub.response)["usage"]
    assert usage == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@pytest.mark.parametrize(
    ("error", "status", "response"),
    [
        (ProxyError(429, "rate_limited", "slow down"), 429, "rate_limited"),
        (TimeoutError(), 504, "the summary call timed out"),
        (asyncio.CancelledError(), 504, "the summary call timed out"),
        (RuntimeError("boom"), 502, "RuntimeError: boom"),
        (ConnectionResetError("peer reset"), 502, "ConnectionResetError: peer reset"),
    ],
    ids=["proxy-error", "timeout", "cancelled", "other", "connection"],
)
def test_a_failed_summary_call_says_why(error: BaseException, status: int, response: str) -> None:
    sub = summary_call(request(), call(error=error))
    assert (sub.status, sub.response) == (status, response)


def test_a_rejected_attempt_is_the_first_try_of_the_same_request() -> None:
    record = request(
        protocol=RESPONSES,
        kind="responses",
        keys=(b"k" * 16,),
        tokens_before=900,
        tokens_after=300,
        status=200,
        latency_ms=1500,
    )
    first = first_attempt()
    sub = rejected_attempt(record, first)
    assert (sub.method, sub.path, sub.protocol) == ("POST", RESPONSES.path, RESPONSES)
    assert sub.started_at == record.started_at == T0
    assert (sub.parent_id, sub.subcall) == ("req-1", "rescued")
    assert (sub.route, sub.policy, sub.authorization) == ("agents", "coding", AUTH)
    assert (sub.upstream, sub.model) == ("openai", "gpt-4o")
    assert sub.original is record.original
    assert sub.keys is record.keys
    assert sub.curated is first.curated
    assert sub.actions == first.actions
    # Before is the request's; after and the answer are the first try's.
    assert (sub.tokens_before, sub.tokens_after) == (900, 450)
    assert (sub.status, sub.response) == (400, OVERFLOW)
    assert sub.latency_s == 0.0  # the second attempt's latency is not the first's


def test_a_rejected_attempt_of_a_record_without_protocol_is_a_chat_call() -> None:
    record = dataclasses.replace(request(), protocol=None)
    sub = rejected_attempt(record, first_attempt())
    assert (sub.protocol, sub.path) == (CHAT, CHAT.path)


# -- through a real writer ----------------------------------------------------------------


def test_a_real_writer_stores_the_linked_records_in_order() -> None:
    sink = MemorySink()
    writer = AuditWriter(sink, RecordBuilder(Redactor.build()), batch_window_s=0.001)
    depths: list[int] = []
    calls = (call(completion=Completion("Short.", 120, 8)), call(error=TimeoutError()))
    record = request(summary_calls=calls, rescued=first_attempt())
    AuditObserver(writer, depths.append)(record)
    assert writer.close(WAIT)
    fields: Sequence[dict[str, Any]] = [r.fields for r in sink.records]
    assert [(f["kind"], f["mode"], f["parent_id"], f["status"]) for f in fields] == [
        ("summarizer", "summary", "req-1", 200),
        ("summarizer", "summary", "req-1", 504),
        ("chat", "rescued", "req-1", 400),
        ("chat", "curated", None, 200),
    ]
    assert fields[-1]["id"] == "req-1"
    assert {f["route"] for f in fields} == {"agents"}
    assert len({f["client"] for f in fields}) == 1
    assert fields[1]["error"] == "the summary call timed out"
    assert len(depths) == 1
    assert 0 <= depths[0] <= 4
