"""serving/forwarding.py, driven directly: the ASGI endpoint over a hand-built `Edge` and a
fake upstream client, so each choice it makes (route, curate or not, which client, what
the record says, which errors it answers) is checked without a server (end to end:
test_app.py, tests/e2e)."""

from __future__ import annotations

import asyncio
import copy
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.policy import Policy
from policies.tool_results import ToolResultTruncation
from proxy.config.audit import AuditConfig
from proxy.config.loader import Config, Route, RouteMatch, ServerConfig, UpstreamConfig
from proxy.curation.plan import CurationSetup
from proxy.errors import ProxyError, method_not_allowed, upstream_timeout, upstream_unreachable
from proxy.observability.exchange import SMALL_BYTES, ExchangeRecord
from proxy.serving import forwarding
from proxy.serving.edge import Edge
from proxy.serving.forwarding import proxy_endpoint, send_error
from proxy.serving.guard import PROXY_CREDENTIAL
from proxy.upstream.client import UpstreamRequest
from proxy.upstream.facts import UpstreamFacts
from proxy.upstream.relay import StreamAborted
from tests import factories as f

pytestmark = pytest.mark.anyio

BASE = "https://upstream.internal:8443/v1"
CHAT = "/v1/chat/completions"
SECRET_KEY = "sk-upstream-secret"
JSON = [(b"content-type", b"application/json")]
USAGE = {"prompt_tokens": 50, "completion_tokens": 2, "total_tokens": 52}
COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "usage": USAGE,
    }
)
OVERFLOW = (
    b'{"error": {"message": "This model\'s maximum context length is 600 tokens. However, '
    b'your messages resulted in 2000 tokens.", "type": "invalid_request_error", '
    b'"param": "messages", "code": "context_length_exceeded"}}'
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the relay is asyncio-only


# -- fakes -------------------------------------------------------------------------------
@dataclass
class Answer:
    """A fake upstream response: its chunks are read one by one; a ProxyError among them
    fails the read there (the upstream breaking mid-body)."""

    status: int = 200
    headers: list[tuple[bytes, bytes]] = field(default_factory=lambda: list(JSON))
    chunks: list[bytes | ProxyError] = field(default_factory=lambda: [COMPLETION])
    closed: bool = False

    async def read(self) -> bytes:
        if not self.chunks:
            return b""
        chunk = self.chunks.pop(0)
        if isinstance(chunk, ProxyError):
            raise chunk
        return chunk

    async def aclose(self) -> None:
        self.closed = True


class FakeClient:
    """An `UpstreamClient` answering from a script; the last entry repeats."""

    def __init__(self, *script: Answer | BaseException) -> None:
        self.script = list(script) or [Answer()]
        self.requests: list[UpstreamRequest] = []
        self.during: list[Any] = []
        """What `on_send` returned for each request (a probe of the edge mid-exchange)."""
        self.on_send: Any = None

    async def send(self, request: UpstreamRequest) -> Answer:
        self.requests.append(copy.copy(request))  # the relay empties its body once sent
        if self.on_send is not None:
            self.during.append(self.on_send())
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, BaseException):
            raise step
        return Answer(step.status, list(step.headers), list(step.chunks))


class Gauge:
    def __init__(self) -> None:
        self.value = 0

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1


# -- building an exchange ----------------------------------------------------------------
def trimming(name: str = "trim", **kw: Any) -> Policy:
    return Policy(name, Chain((ToolResultTruncation(max_tokens=40, keep_recent=0),)), **kw)


def make_config(
    *routes: Route,
    policies: Sequence[Policy] = (),
    audit: AuditConfig | None = None,
    api_key: str | None = None,
) -> Config:
    known = {p.name: p for p in (Policy("off"), trimming(), *policies)}
    return Config(
        source="<test>",
        server=ServerConfig(),
        upstreams={
            "main": UpstreamConfig(
                "main", BASE, api_key=api_key, connect_timeout_s=3, read_timeout_s=77
            ),
            "other": UpstreamConfig("other", "http://other.internal/v1"),
        },
        policies=known,
        routes=routes or (Route("default", "main", "off"),),
        audit=audit or AuditConfig(sink="none"),
    )


def make_edge(
    config: Config,
    client: FakeClient,
    *,
    observers: Sequence[Any] = (),
    facts: UpstreamFacts | None = None,
    metrics: Any = None,
    max_body_bytes: int = 1 << 20,
) -> Edge:
    return Edge(
        config,
        asyncio.get_running_loop(),
        client,
        CurationSetup(config, f.counter(), set(), None, facts),
        tuple(observers),
        max_body_bytes,
        {},
        route_by_headers=any(r.match.headers for r in config.routes),
        route_by_model=any(r.match.model is not None for r in config.routes),
        metrics=metrics,
    )


@dataclass
class Result:
    status: int | None
    headers: list[tuple[bytes, bytes]]
    body: bytes
    messages: list[dict[str, Any]]

    def header(self, name: bytes) -> bytes | None:
        return next((v for n, v in self.headers if n == name), None)

    def error(self) -> dict[str, Any]:
        error: dict[str, Any] = orjson.loads(self.body)["error"]
        return error


async def exchange(
    edge: Edge,
    body: bytes = b"{}",
    *,
    method: str = "POST",
    path: str = CHAT,
    headers: Sequence[tuple[bytes, bytes]] = (),
    query: bytes = b"",
    disconnect_first: bool = False,
    **scope_extra: Any,
) -> Result:
    """Run one request through `proxy_endpoint`; the client stays connected."""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": [(b"host", b"proxy.local"), *headers],
        "state": {"edge": SimpleNamespace(current=edge)},
        **scope_extra,
    }
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if disconnect_first:
            return {"type": "http.disconnect"}
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # still connected
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await proxy_endpoint(scope, receive, send)
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    return Result(
        start["status"] if start else None,
        list(start["headers"]) if start else [],
        b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"),
        sent,
    )


def chat_body(model: str = "gpt-4o", turns: int = 0) -> bytes:
    """An agent history with one long old tool result (a truncation cuts it), plus
    `turns` filler exchanges (a token budget drops them)."""
    messages = [
        *f.log_read(),
        f.assistant("The log is long."),
    ]
    for i in range(turns):
        messages += [f.user(f"question {i} " + f.long_text(40)), f.assistant(f"answer {i}")]
    messages.append(f.user("Summarize it."))
    return orjson.dumps({"model": model, "messages": messages})


# -- what goes upstream ------------------------------------------------------------------
async def test_an_uncurated_path_goes_to_its_upstream_as_sent_with_its_timeouts() -> None:
    client = FakeClient()
    records: list[ExchangeRecord] = []
    edge = make_edge(make_config(api_key=SECRET_KEY), client, observers=[records.append])
    got = await exchange(
        edge,
        b'{"input": "hi"}',
        path="/v1/embeddings",
        query=b"a=1&b=%20",
        headers=[(b"authorization", b"Bearer sk-client"), (b"connection", b"keep-alive")],
    )
    (request,) = client.requests
    assert (request.method, request.url) == ("POST", f"{BASE}/embeddings?a=1&b=%20")
    assert request.body == b'{"input": "hi"}'
    assert (request.connect_timeout_s, request.read_timeout_s) == (3, 77)
    assert (b"authorization", b"Bearer " + SECRET_KEY.encode()) in request.headers
    assert not any(n in (b"host", b"connection") for n, _ in request.headers)
    assert (got.status, got.body) == (200, COMPLETION)
    (record,) = records
    assert got.header(b"x-curator-request-id") == record.id.encode()
    assert [n for n, _ in got.headers if n.startswith(b"x-curator-")] == [b"x-curator-request-id"]
    assert (record.route, record.upstream, record.protocol, record.status) == (
        "default",
        "main",
        None,
        200,
    )
    assert (record.spend, record.authorization, record.response) == (None, None, None)


async def test_headers_route_an_uncurated_path_only_when_a_route_matches_on_them() -> None:
    client = FakeClient()
    routes = (
        Route("team", "other", "off", RouteMatch(headers=(("x-team", "agents"),))),
        Route("default", "main", "off"),
    )
    edge = make_edge(make_config(*routes), client)
    await exchange(edge, path="/v1/embeddings", headers=[(b"x-team", b"agents")])
    await exchange(edge, path="/v1/embeddings", headers=[(b"x-team", b"chat")])
    assert [r.url for r in client.requests] == [
        "http://other.internal/v1/embeddings",
        f"{BASE}/embeddings",
    ]


async def test_a_curated_path_sends_the_curated_body_and_answers_its_headers() -> None:
    client = FakeClient()
    records: list[ExchangeRecord] = []
    edge = make_edge(
        make_config(Route("default", "main", "trim")), client, observers=[records.append]
    )
    raw = chat_body()
    got = await exchange(edge, raw)
    (request,) = client.requests
    assert len(request.body) < len(raw) / 2
    assert orjson.loads(request.body)["messages"][-1] == f.user("Summarize it.")
    (record,) = records
    before, after = record.tokens_before, record.tokens_after
    assert before is not None
    assert after is not None
    assert after < before
    assert got.header(b"x-curator-route") == b"default"
    assert got.header(b"x-curator-policy") == b"trim"
    assert got.header(b"x-curator-tokens-after") == str(after).encode()
    assert got.headers[-1][0].startswith(b"x-curator-")  # appended after the upstream's


async def test_a_policy_header_is_read_even_when_no_route_matches_on_headers() -> None:
    client = FakeClient()
    route = Route("default", "main", "off", allow_policy_header=True)
    edge = make_edge(make_config(route), client)
    raw = chat_body()
    got = await exchange(edge, raw, headers=[(b"x-curator-policy", b"trim")])
    assert got.header(b"x-curator-policy") == b"trim"
    assert len(client.requests[0].body) < len(raw)
    plain = await exchange(edge, raw)
    assert plain.header(b"x-curator-policy") == b"off"
    assert client.requests[1].body == raw  # passthrough: the client's exact bytes


# -- proxy errors ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (upstream_unreachable, 502, "upstream_unreachable"),
        (upstream_timeout, 504, "upstream_timeout"),
    ],
)
async def test_upstream_failures_answer_openai_errors_without_urls_or_keys(
    error: Any, status: int, code: str
) -> None:
    failure: ProxyError = error()
    failure.__cause__ = OSError(f"{BASE} refused; Authorization: Bearer {SECRET_KEY}")
    client = FakeClient(failure)
    records: list[ExchangeRecord] = []
    config = make_config(Route("default", "main", "trim"), api_key=SECRET_KEY)
    edge = make_edge(config, client, observers=[records.append])
    got = await exchange(edge, chat_body())
    assert got.status == status
    assert got.error()["code"] == code
    assert set(got.error()) == {"message", "type", "param", "code"}
    for leak in ("upstream.internal", "8443", SECRET_KEY, "Traceback"):
        assert leak.encode() not in got.body
    assert got.header(b"content-length") == str(len(got.body)).encode()
    assert got.header(b"x-curator-policy") == b"trim"  # curation's headers still come back
    (record,) = records
    assert (record.status, record.outcome, record.error) == (status, "upstream_error", code)
    assert record.upstream_status is None


async def test_the_proxys_own_refusals_are_proxy_errors_not_upstream_errors() -> None:
    client = FakeClient()
    records: list[ExchangeRecord] = []
    routes = (Route("chat-only", "main", "off", RouteMatch(path="/v1/chat/*")),)
    edge = make_edge(make_config(*routes), client, observers=[records.append], max_body_bytes=10)
    no_route = await exchange(edge, path="/v1/models", method="GET", body=b"")
    too_big = await exchange(edge, b"x" * 11)
    assert (no_route.status, no_route.error()["code"]) == (404, "no_route")
    assert (too_big.status, too_big.error()["code"]) == (413, "request_too_large")
    assert client.requests == []
    assert [(r.status, r.outcome, r.error) for r in records] == [
        (404, "proxy_error", "no_route"),
        (413, "proxy_error", "request_too_large"),
    ]
    assert records[0].route is None
    assert no_route.header(b"x-curator-request-id") == records[0].id.encode()


async def test_a_method_refused_before_the_body_is_read_says_what_is_allowed() -> None:
    edge = make_edge(make_config(), FakeClient())
    got = await exchange(edge, method="TRACE", path="/v1/models", disconnect_first=True)
    assert got.status == 405
    assert got.header(b"allow") is not None
    assert got.error()["code"] == "method_not_allowed"


async def test_send_error_puts_json_length_extra_then_curator_headers() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    err = method_not_allowed(("GET", "POST"))
    await send_error(send, err, [(b"x-curator-request-id", b"abc")])
    start, body = sent
    assert start["status"] == 405
    assert start["headers"] == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(err.body())).encode()),
        (b"allow", b"GET, POST"),
        (b"x-curator-request-id", b"abc"),
    ]
    assert body == {"type": "http.response.body", "body": err.body(), "more_body": False}


async def test_a_client_gone_before_its_body_gets_nothing_and_is_recorded() -> None:
    client = FakeClient()
    records: list[ExchangeRecord] = []
    edge = make_edge(make_config(), client, observers=[records.append])
    got = await exchange(edge, disconnect_first=True)
    assert got.messages == []
    assert client.requests == []
    (record,) = records
    assert (record.outcome, record.status, record.error) == ("client_disconnect", None, None)


async def test_an_unexpected_error_propagates_and_is_still_recorded() -> None:
    records: list[ExchangeRecord] = []
    gauge = Gauge()
    edge = make_edge(
        make_config(),
        FakeClient(RuntimeError("bug")),
        observers=[records.append],
        metrics=SimpleNamespace(inflight=gauge),
    )
    with pytest.raises(RuntimeError, match="bug"):
        await exchange(edge)
    (record,) = records
    assert (record.outcome, record.status) == ("proxy_error", None)
    assert gauge.value == 0


async def test_an_upstream_breaking_mid_body_drops_the_connection_as_an_upstream_error() -> None:
    broken = Answer(chunks=[b'{"id": "chat', upstream_timeout()])
    records: list[ExchangeRecord] = []
    edge = make_edge(make_config(), FakeClient(broken), observers=[records.append])
    with pytest.raises(StreamAborted):
        await exchange(edge)
    (record,) = records
    assert (record.outcome, record.status, record.upstream_status) == ("upstream_error", 200, 200)
    assert (record.error, record.incomplete) == ("upstream_timeout", "upstream_timeout")


async def test_the_inflight_gauge_counts_the_exchange_while_it_runs() -> None:
    gauge = Gauge()
    client = FakeClient()
    client.on_send = lambda: gauge.value
    edge = make_edge(make_config(), client, metrics=SimpleNamespace(inflight=gauge))
    await exchange(edge)
    assert (client.during, gauge.value) == ([1], 0)


# -- passthrough or curated: calibration and spend ---------------------------------------
@pytest.fixture
def learned(monkeypatch: pytest.MonkeyPatch) -> list[ExchangeRecord]:
    calls: list[ExchangeRecord] = []
    real = forwarding.learn

    def spy(facts: UpstreamFacts, record: ExchangeRecord, counter: Any, usage: Any) -> None:
        calls.append(record)
        real(facts, record, counter, usage)

    monkeypatch.setattr(forwarding, "learn", spy)
    return calls


@pytest.fixture
def spent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    sents: list[Any] = []
    real = forwarding.account

    def spy(sent: Any, *args: Any) -> Any:
        sents.append(sent)
        return real(sent, *args)

    monkeypatch.setattr(forwarding, "account", spy)
    return sents


async def test_a_curated_exchange_teaches_the_calibration_and_counts_its_counterfactual(
    learned: list[ExchangeRecord], spent: list[Any]
) -> None:
    records: list[ExchangeRecord] = []
    config = make_config(Route("default", "main", "trim"))
    edge = make_edge(config, FakeClient(), observers=[records.append], facts=UpstreamFacts())
    await exchange(edge, chat_body())
    (record,) = records
    assert learned == [record]
    assert record.tail == COMPLETION[-len(record.tail) :]
    assert b'"usage"' in record.tail
    (sent,) = spent
    assert sent.original is record.original is not None
    assert record.spend is not None


@pytest.mark.parametrize(("turns", "at_once"), [(0, True), (3, False)])
async def test_a_small_exchange_has_its_counterfactual_at_once(turns: int, at_once: bool) -> None:
    records: list[ExchangeRecord] = []
    config = make_config(Route("default", "main", "trim"))
    edge = make_edge(config, FakeClient(), observers=[records.append])
    body = chat_body(turns=turns)
    assert (len(body) <= SMALL_BYTES) is at_once  # 3.5 KB, 4.7 KB
    await exchange(edge, body)
    (record,) = records
    assert record.spend is not None
    assert record.spend.deferred.ready is at_once  # else computed later, off the loop


async def test_a_passthrough_policy_is_neither_calibrated_nor_given_a_counterfactual(
    learned: list[ExchangeRecord], spent: list[Any]
) -> None:
    records: list[ExchangeRecord] = []
    edge = make_edge(make_config(), FakeClient(), observers=[records.append], facts=UpstreamFacts())
    await exchange(edge, chat_body())
    (record,) = records
    assert record.policy == "off"
    assert record.original is not None  # read, but the actual cost is the uncurated one
    assert learned == []
    (sent,) = spent
    assert sent.original is None
    assert record.spend is not None


async def test_an_incomplete_response_teaches_nothing(learned: list[ExchangeRecord]) -> None:
    broken = Answer(chunks=[COMPLETION[:20], upstream_timeout()])
    config = make_config(Route("default", "main", "trim"))
    edge = make_edge(config, FakeClient(broken), observers=[lambda _r: None], facts=UpstreamFacts())
    with pytest.raises(StreamAborted):
        await exchange(edge, chat_body())
    assert learned == []


async def test_without_observers_only_the_calibration_finishes_the_record(
    learned: list[ExchangeRecord],
) -> None:
    config = make_config(Route("default", "main", "trim"))
    await exchange(make_edge(config, FakeClient(), facts=UpstreamFacts()), chat_body())
    assert len(learned) == 1
    assert learned[0].tail  # kept for the usage although nobody observes
    await exchange(make_edge(config, FakeClient()), chat_body())
    await exchange(make_edge(config, FakeClient(), facts=UpstreamFacts()), path="/v1/models")
    assert len(learned) == 1


async def test_an_off_route_keeps_no_tail_and_has_no_spend(spent: list[Any]) -> None:
    records: list[ExchangeRecord] = []
    config = make_config(Route("default", "main", "trim", mode="off"))
    edge = make_edge(config, FakeClient(), observers=[records.append], facts=UpstreamFacts())
    raw = chat_body()
    await exchange(edge, raw)
    (record,) = records
    assert (record.mode, record.tail, record.spend) == ("off", b"", None)
    assert spent == []


# -- the overflow rescue: which client -----------------------------------------------------
def budgeted(name: str, on_upstream_overflow: Any) -> Policy:
    chain = Chain((TokenBudget(),))
    return Policy(name, chain, reserve_output_tokens=16, on_upstream_overflow=on_upstream_overflow)


@pytest.mark.parametrize(
    ("policy", "attempts", "status"),
    [("retry", 2, 200), ("pass", 1, 400), ("off", 1, 400)],
)
async def test_an_upstream_overflow_is_rescued_only_for_a_curating_retry_policy(
    policy: str, attempts: int, status: int
) -> None:
    client = FakeClient(Answer(400, chunks=[OVERFLOW]), Answer())
    policies = (budgeted("retry", "retry"), budgeted("pass", "pass"))
    config = make_config(Route("default", "main", policy), policies=policies)
    records: list[ExchangeRecord] = []
    edge = make_edge(config, client, observers=[records.append])
    raw = chat_body(turns=20)
    got = await exchange(edge, raw)
    assert (len(client.requests), got.status) == (attempts, status)
    assert client.requests[0].body == raw  # within gpt-4o's window: nothing cut at first
    if attempts == 2:
        assert len(client.requests[1].body) < len(raw)
        assert got.header(b"x-curator-rescued") == b"1"
        assert records[0].rescued is not None
    else:
        assert got.body == OVERFLOW
        assert got.header(b"x-curator-rescued") is None


async def test_a_shadow_route_is_never_rescued() -> None:
    client = FakeClient(Answer(400, chunks=[OVERFLOW]), Answer())
    route = Route("default", "main", "retry", mode="shadow")
    edge = make_edge(make_config(route, policies=(budgeted("retry", "retry"),)), client)
    got = await exchange(edge, chat_body(turns=20))
    assert (len(client.requests), got.status) == (1, 400)


# -- the audit's view: credential and response body ----------------------------------------
def audited_config(store_responses: bool = True) -> Config:
    audit = AuditConfig(sink="jsonl", path="-", store_responses=store_responses)
    return make_config(Route("default", "main", "trim"), audit=audit)


async def test_the_credential_is_kept_for_the_audit_of_a_curated_path_only() -> None:
    records: list[ExchangeRecord] = []
    bearer = [(b"authorization", b"Bearer sk-client")]
    edge = make_edge(audited_config(), FakeClient(), observers=[records.append])
    await exchange(edge, chat_body(), headers=bearer)
    await exchange(edge, chat_body(), headers=[(b"api-key", b"azure-key")])
    await exchange(edge, chat_body(), **{PROXY_CREDENTIAL: b"Bearer proxy-key"})
    await exchange(edge, path="/v1/embeddings", headers=bearer)
    quiet = make_edge(
        make_config(Route("default", "main", "trim")), FakeClient(), observers=[records.append]
    )
    await exchange(quiet, chat_body(), headers=bearer)
    assert [r.authorization for r in records] == [
        "Bearer sk-client",
        "azure-key",
        "Bearer proxy-key",
        None,  # no protocol read it: no audit record
        None,  # the audit is off
    ]


@pytest.mark.parametrize(
    ("store_responses", "status", "kept"),
    [(True, 200, True), (False, 200, False), (False, 400, True)],
)
async def test_the_response_body_is_captured_for_the_audit_as_configured(
    store_responses: bool, status: int, kept: bool
) -> None:
    records: list[ExchangeRecord] = []
    answer = Answer(status, chunks=[COMPLETION])
    edge = make_edge(
        audited_config(store_responses), FakeClient(answer), observers=[records.append]
    )
    await exchange(edge, chat_body())
    (record,) = records
    assert (record.response is not None) == kept
    assert record.tail.endswith(COMPLETION[-20:])  # the usage is read either way


# -- what a stream holds -----------------------------------------------------------------
PADDING = 4 << 20


def held_from(path: str) -> int:
    """Bytes still held that were allocated in the file at `path` (traced since the start):
    other threads' allocations meanwhile (a previous test's) are not counted."""
    only = tracemalloc.Filter(inclusive=True, filename_pattern=path)
    traced = tracemalloc.take_snapshot().filter_traces([only])
    return sum(stat.size for stat in traced.statistics("filename"))


class _Holding:
    """An upstream answering one stream whose second read measures what is still held of
    the body this file made (tracemalloc), and keeping nothing of the request itself."""

    def __init__(self) -> None:
        self.held: int | None = None

    async def send(self, request: UpstreamRequest) -> Answer:  # noqa: ARG002 - kept nothing
        probe = self

        class Measuring(Answer):
            async def read(self) -> bytes:
                await asyncio.sleep(0)  # a stream's read waits, as a real one does
                if self.chunks == [b"data: [DONE]\n\n"]:
                    probe.held = held_from(__file__)
                return await super().read()

        events = [b'data: {"choices": []}\n\n', b"data: [DONE]\n\n"]
        return Measuring(200, [(b"content-type", b"text/event-stream")], list(events))


@pytest.mark.parametrize("policy", ["off", "trim"])
async def test_a_stream_in_progress_holds_neither_the_request_bytes_nor_what_went_upstream(
    policy: str,
) -> None:
    """Sent, the bytes are freed: an agent's 500 KB body is not held while its stream
    lasts. The body here is padded with whitespace: big as bytes, small once parsed."""
    client = _Holding()
    edge = make_edge(
        make_config(Route("default", "main", policy)), client, max_body_bytes=2 * PADDING
    )
    scope = {"type": "http", "method": "POST", "path": CHAT, "raw_path": CHAT.encode()}
    scope |= {"query_string": b"", "headers": [], "state": {"edge": SimpleNamespace(current=edge)}}
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            await asyncio.Event().wait()
        delivered = True
        padded = chat_body()[:-1] + b" " * PADDING + b"}"  # made here, held by no test frame
        return {"type": "http.request", "body": padded, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    tracemalloc.start()
    try:
        await proxy_endpoint(scope, receive, send)
    finally:
        tracemalloc.stop()
    assert client.held is not None
    assert client.held < PADDING / 4
