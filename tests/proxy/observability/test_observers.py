"""observers.py: chat exchanges become audit records (summarizer calls too), written per worker."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.policy import Policy
from policies.summarizer import Summarizer
from policies.summary_io import Completion, SummaryRequest
from policies.system import SystemPreservation
from policies.tool_results import ToolResultTruncation
from proxy.config.audit import AuditConfig
from proxy.config.loader import (
    Config,
    Route,
    RouteMatch,
    ServerConfig,
    UpstreamConfig,
)
from proxy.errors import upstream_timeout
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.metadata import audit_kind, audit_mode, audit_response
from proxy.observability.audit.observer import summary_call
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.stamps import key_fingerprint
from proxy.observability.exchange import ExchangeRecord, SummaryCall, new_id
from proxy.observability.observers import open_observability
from proxy.protocols.chat import CHAT as CHAT_API
from proxy.serving.app import create_app
from tests import factories as f
from tests.factories import audited

BASE = "http://upstream.test/v1"
CHAT = "/v1/chat/completions"
# Assembled at run time, so no token-shaped literal sits in the source.
SECRET = "sk-proj-" + "Ab1_-x" * 26
CLIENT_KEY = "sk-client-" + "k3y" * 8
REPLY = "Done. The key was " + SECRET + " and nothing else."
Handler = Callable[[httpx.Request], httpx.Response]


def trim_policy() -> Policy:
    pins = SystemPreservation(pin_first_user=True)
    curators = (pins, ToolResultTruncation(max_tokens=40, keep_recent=0), ToolPairCoherence())
    return Policy("trim", Chain(curators), pins=pins.pin_spec())


def summary_policy(trigger: int) -> Policy:
    summarizer = Summarizer(upstream="main", model="gpt-4o-mini", trigger_tokens=trigger)
    return Policy("summary", Chain((SystemPreservation(), summarizer, ToolPairCoherence())))


def make_config(tmp_path: Path, policy: Policy | None = None, **audit: Any) -> Config:
    chosen = policy or trim_policy()
    return Config(
        source="<test>",
        server=ServerConfig(),
        upstreams={"main": UpstreamConfig("main", BASE)},
        policies={chosen.name: chosen},
        routes=(
            Route("chat", "main", chosen.name, RouteMatch(path=CHAT)),
            Route("other", "main", chosen.name),
        ),
        audit=AuditConfig(**{"path": str(tmp_path / "audit.db"), **audit}),
    )


class Chunks(httpx.AsyncByteStream):
    """A response body arriving in several pieces, as a real stream does."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def completion(text: str, prompt: int = 120, produced: int = 9) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    usage = {"prompt_tokens": prompt, "completion_tokens": produced}
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message}],
        "usage": usage,
    }


def sse(text: str, split: int) -> list[bytes]:
    """A streamed completion whose text is cut at `split` (mid-secret), events cut mid-line."""
    events = b"".join(
        b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}) + b"\n\n"
        for piece in (text[:split], text[split:])
    )
    done = orjson.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = events + b"data: " + done + b"\n\ndata: [DONE]\n\n"
    return [body[i : i + 37] for i in range(0, len(body), 37)]


def answer(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/models"):
        return httpx.Response(200, json={"object": "list", "data": []})
    if b'"stream":true' in request.content:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=Chunks(sse(REPLY, 30)))
    return httpx.Response(200, json=completion(REPLY))


def conversation() -> list[dict[str, Any]]:
    return [
        f.system("You are a coding agent."),
        f.user(f"Deploy with {SECRET} please."),
        f.assistant_calls(f.call("c1", "read_file", {"path": "deploy.env"})),
        f.tool_result("c1", f"OPENAI_API_KEY={SECRET}\n" + f.long_text(200)),
        f.user("Go on."),
    ]


@pytest.fixture
def audit_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.db"


def run(config: Config, *requests: dict[str, Any], handler: Handler = answer) -> list[Any]:
    """Send the requests through the app, then shut it down (which flushes the audit log)."""
    app = create_app(config, httpx.MockTransport(handler))
    with TestClient(app) as client:
        return [client.request(**r) for r in requests]


def post(body: Any, **extra: Any) -> dict[str, Any]:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"authorization": f"Bearer {CLIENT_KEY}", **extra}
    return {"method": "POST", "url": CHAT, "content": content, "headers": headers}


def fetch(path: Path, record_id: str) -> dict[str, Any]:
    reader = SqliteReader(str(path))
    try:
        record = reader.get(record_id)
    finally:
        reader.close()
    assert record is not None, record_id
    return record


def listed(path: Path) -> list[dict[str, Any]]:
    reader = SqliteReader(str(path))
    try:
        return reader.summaries(limit=100)
    finally:
        reader.close()


def stored(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def test_a_curated_request_is_stored_with_both_message_sets_redacted(
    tmp_path: Path, audit_path: Path
) -> None:
    messages = conversation()
    (response,) = run(make_config(tmp_path), post({"model": "gpt-4o", "messages": messages}))
    rid = response.headers["x-curator-request-id"]
    record = fetch(audit_path, rid)
    assert (record["kind"], record["route"], record["policy"]) == ("chat", "chat", "trim")
    assert (record["mode"], record["status"], record["model"]) == ("curated", 200, "gpt-4o")
    assert record["tokens_before"] == int(response.headers["x-curator-tokens-before"])
    assert record["tokens_after"] == int(response.headers["x-curator-tokens-after"])
    assert [a["curator"] for a in record["actions"]] == ["tool_result_truncation"]
    assert len(record["original"]) == len(record["curated"]) == len(messages)
    assert record["original"][3] != record["curated"][3]  # the tool result was cut
    assert "[REDACTED:openai_key]" in record["original"][1]["content"]
    assert record["response"]["text"] == REPLY.replace(SECRET, "[REDACTED:openai_key]")
    assert record["response"]["usage"] == completion(REPLY)["usage"]
    assert record["client"] == key_fingerprint(f"Bearer {CLIENT_KEY}")
    assert record["latency_ms"] > 0
    assert SECRET.encode() not in stored(audit_path)
    assert CLIENT_KEY.encode() not in stored(audit_path)


def test_a_streamed_response_is_reassembled_across_chunks(tmp_path: Path, audit_path: Path) -> None:
    body = {"model": "gpt-4o", "messages": [f.user("hi")], "stream": True}
    (response,) = run(make_config(tmp_path), post(body))
    assert response.content == b"".join(sse(REPLY, 30))  # relayed unchanged
    record = fetch(audit_path, response.headers["x-curator-request-id"])
    assert record["response"]["text"] == REPLY.replace(SECRET, "[REDACTED:openai_key]")
    assert record["response"]["finish_reason"] == "stop"
    assert record["ttfb_ms"] is not None
    assert SECRET.encode() not in stored(audit_path)


def test_without_store_responses_only_error_bodies_are_kept(
    tmp_path: Path, audit_path: Path
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if b"fail" in request.content:
            error = {"error": {"message": "bad request", "code": "invalid_value"}}
            return httpx.Response(400, json=error)
        return answer(request)

    config = make_config(tmp_path, store_responses=False)
    ok, bad = run(
        config,
        post({"model": "gpt-4o", "messages": [f.user("hi")]}),
        post({"model": "gpt-4o", "messages": [f.user("fail")]}),
        handler=handler,
    )
    good = fetch(audit_path, ok.headers["x-curator-request-id"])
    failed = fetch(audit_path, bad.headers["x-curator-request-id"])
    assert good["response"] is None
    assert failed["status"] == 400
    assert failed["error"] == {"error": {"message": "bad request", "code": "invalid_value"}}


def test_skipped_requests_are_stored_with_their_reason(tmp_path: Path, audit_path: Path) -> None:
    bad_messages = {"model": "gpt-4o", "messages": [{"role": "user", "content": SECRET}, 7]}
    invalid, odd = run(make_config(tmp_path), post(b"{not json"), post(bad_messages))
    first = fetch(audit_path, invalid.headers["x-curator-request-id"])
    second = fetch(audit_path, odd.headers["x-curator-request-id"])
    assert (first["mode"], first["skip_reason"], first["original"]) == (
        "skipped",
        "invalid_json",
        [],
    )
    assert second["skip_reason"] == "bad_messages"
    assert second["original"] == [{"role": "user", "content": "[REDACTED:openai_key]"}, 7]


def test_proxy_errors_are_stored_with_their_code(tmp_path: Path, audit_path: Path) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    body = {"model": "gpt-4o", "messages": [f.user("hi")]}
    (response,) = run(make_config(tmp_path), post(body), handler=refuse)
    assert response.status_code == 502
    record = fetch(audit_path, response.headers["x-curator-request-id"])
    assert (record["status"], record["error"]) == (502, "upstream_unreachable")


def test_other_paths_and_audit_off_write_no_record(tmp_path: Path, audit_path: Path) -> None:
    chat = post({"model": "gpt-4o", "messages": [f.user("hi")]})
    models, answered = run(make_config(tmp_path), {"method": "GET", "url": "/v1/models"}, chat)
    assert models.status_code == 200
    (only,) = listed(audit_path)
    assert only["id"] == answered.headers["x-curator-request-id"]
    off = make_config(tmp_path / "off", sink="none")
    run(off, post({"model": "gpt-4o", "messages": [f.user("hi")]}))
    assert not (tmp_path / "off").exists()


def long_chat(turns: int) -> list[dict[str, Any]]:
    messages = [f.system("You are terse.")]
    for i in range(turns):
        messages += [f.user(f"question {i}: " + f.long_text(40)), f.assistant(f.long_text(40))]
    return [*messages, f.user("And now?")]


def test_summarizer_calls_get_their_own_linked_records(tmp_path: Path, audit_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if orjson.loads(request.content)["model"] == "gpt-4o-mini":
            return httpx.Response(200, json=completion("They talked about lorem.", 900, 12))
        return answer(request)

    config = make_config(tmp_path, summary_policy(trigger=600))
    body = {"model": "gpt-4o", "messages": long_chat(12)}
    (response,) = run(config, post(body), handler=handler)
    assert response.headers["x-curator-actions"].startswith("summarizer=")
    rid = response.headers["x-curator-request-id"]
    kinds = {r["kind"]: r for r in listed(audit_path)}
    assert set(kinds) == {"chat", "summarizer"}
    call = fetch(audit_path, kinds["summarizer"]["id"])
    assert (call["parent_id"], call["model"], call["status"]) == (rid, "gpt-4o-mini", 200)
    assert call["response"]["text"] == "They talked about lorem."
    assert call["response"]["usage"]["prompt_tokens"] == 900
    assert call["original"], "the summarizer's prompt is stored"


def record_for(**overrides: Any) -> ExchangeRecord:
    base: dict[str, Any] = {
        "id": "r1",
        "started_at": 1_700_000_000.0,
        "method": "POST",
        "path": CHAT,
        "route": "chat",
        "upstream": "main",
        "policy": "trim",
        "model": "gpt-4o",
        "skip_reason": None,
        "protocol": CHAT_API,
        "body": None,
        "original": None,
        "curated": None,
        "actions": (),
        "tokens_before": None,
        "tokens_after": None,
        "curation_s": None,
        "summary": None,
        "status": 200,
        "upstream_status": 200,
        "latency_s": 0.25,
        "ttfb_s": None,
        "outcome": "ok",
        "mode": "enforce",
    }
    return ExchangeRecord(**{**base, **overrides})


def test_an_unchanged_request_stores_no_second_message_list() -> None:
    messages = [f.user("hi")]
    builder = RecordBuilder(Redactor.build())
    same = builder.build(record_for(original=messages, curated=messages))
    assert len(same.original) == 1
    assert same.curated is None
    changed = builder.build(record_for(original=messages, curated=[f.user("h")]))
    assert changed.curated is not None
    assert changed.as_dict()["curated"] == [f.user("h")]


def test_shadow_mode_is_named_in_the_record() -> None:
    assert audit_mode(record_for(mode="shadow")) == "shadow"
    assert audit_mode(record_for(skip_reason="curator_error")) == "skipped"
    assert audit_mode(record_for()) == "curated"


def call_with(completion: Completion | None, error: BaseException | None) -> SummaryCall:
    request = SummaryRequest("main", "gpt-4o-mini", 100, 5.0)
    return SummaryCall(1_700_000_000.0, [f.user("x")], request, completion, error, 0.5)


@pytest.mark.parametrize(
    ("error", "status", "text"),
    [
        (upstream_timeout(), 504, "upstream_timeout"),
        (TimeoutError(), 504, "the summary call timed out"),
        (ValueError("no text"), 502, "ValueError: no text"),
    ],
)
def test_failed_summarizer_calls_keep_why(error: BaseException, status: int, text: str) -> None:
    entry = summary_call(record_for(), call_with(None, error))
    assert (audit_kind(entry), entry.parent_id, entry.status, audit_response(entry)) == (
        "summarizer",
        "r1",
        status,
        text,
    )
    assert entry.id != "r1"


def test_open_observability_counts_failed_and_dropped_records(tmp_path: Path) -> None:
    unwritable = tmp_path / "missing" / "audit.jsonl"
    config = make_config(tmp_path, sink="jsonl", path=str(unwritable))

    async def scenario() -> tuple[Any, ...]:
        async with open_observability(config) as seen:
            assert seen.audit is not None
            assert seen.metrics is not None
            seen.audit.submit(audited(id="a", time=0.0))
        seen.audit.submit(audited(id="b", time=0.0))  # closed by now: dropped
        return seen.metrics, seen.audit.stats()

    metrics, stats = anyio.run(scenario)
    sample = metrics.registry.get_sample_value
    assert sample("curator_audit_records_total", {"result": "failed"}) == 1 == stats.failed
    assert sample("curator_audit_records_total", {"result": "dropped"}) == 1 == stats.dropped
    assert sample("curator_audit_records_total", {"result": "written"}) == 0


def test_with_the_audit_on_the_spend_jobs_run_in_its_thread(tmp_path: Path) -> None:
    """One background thread wakes per exchange, not two; without the audit, the spend
    thread runs them."""

    async def scenario(config: Config) -> list[str]:
        ran: list[str] = []
        async with open_observability(config) as seen:
            assert seen.metrics is not None
            thread = seen.metrics.spend.thread
            thread.submit(lambda: ran.append(threading.current_thread().name))
            assert thread.join(10)
        return ran

    assert anyio.run(scenario, make_config(tmp_path)) == ["curator-audit"]
    assert anyio.run(scenario, make_config(tmp_path, sink="none")) == ["curator-spend"]


def test_the_audit_writer_takes_the_workers_turns(tmp_path: Path) -> None:
    """`open_edge` gives the same turns to the curation thread: one of them runs at a time."""

    async def scenario() -> bool:
        async with open_observability(make_config(tmp_path)) as seen:
            assert seen.audit is not None
            return seen.audit.turns is seen.turns

    assert anyio.run(scenario)


def test_request_ids_are_hex_led_by_the_time_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_id() for _ in range(200)]
    after = time.time_ns() // 1_000_000
    for request_id in ids:
        assert re.fullmatch(r"[0-9a-f]{32}", request_id)
        assert before <= int(request_id[:12], 16) <= after
    assert len(set(ids)) == len(ids)
    assert [i[:12] for i in ids] == sorted(i[:12] for i in ids)  # they sort by time
