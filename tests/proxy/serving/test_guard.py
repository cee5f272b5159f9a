"""The gate (guard.py) at the ASGI level: proxy keys, the body limit, max_inflight, what it
answers and counts, the key ring, the credential a request presents, and the bind check."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.config.auth import AuthConfig
from proxy.config.limits import MIB, Limits
from proxy.config.loader import Config, ServerConfig, UpstreamConfig
from proxy.config.viewer import ViewerConfig
from proxy.errors import ProxyError
from proxy.observability.metrics.labels import REJECT_REASONS
from proxy.serving import guard as guard_module
from proxy.serving.conn_limits import BODY_TIMED_OUT
from proxy.serving.guard import (
    PROXY_CREDENTIAL,
    Guard,
    Inflight,
    KeyRing,
    bind_refusal,
    count_rejection,
    is_loopback,
    presented_credential,
)
from proxy.types import Message, Receive, Scope
from tests.proxy.serving.test_forwarding import held_from

KEY = "ck-proxy-key-0001"
OTHER = "ck-proxy-key-0002"
CHAT = "/v1/chat/completions"
LIMIT = MIB  # max_body_mb=1
Headers = list[tuple[bytes, bytes]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def config(
    keys: Sequence[str] = (),
    *,
    max_inflight: int = 2,
    public_viewer: bool = False,
    upstreams: Sequence[UpstreamConfig] = (),
    auth: AuthConfig | None = None,
) -> Config:
    limits = Limits(max_body_mb=1, max_inflight=max_inflight, body_timeout_s=2.5)
    return Config(
        source="<guard>",
        server=ServerConfig(limits=limits),
        upstreams={u.name: u for u in upstreams},
        policies={},
        routes=(),
        auth=auth or AuthConfig(keys=tuple(keys)),
        viewer=ViewerConfig(public=public_viewer),
    )


class Rejections:
    """The live edge's `rejected` family, as count_rejection reaches it: records reasons."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def labels(self, reason: str) -> SimpleNamespace:
        return SimpleNamespace(inc=lambda: self.reasons.append(reason))

    def state(self) -> dict[str, Any]:
        metrics = SimpleNamespace(rejected=self)
        return {"edge": SimpleNamespace(current=SimpleNamespace(metrics=metrics))}


class App:
    """The app behind the guard: records what it got, reads the body, answers 200."""

    def __init__(self, inflight: Inflight | None = None, reads: int = 1) -> None:
        self.inflight = inflight
        self.reads = reads
        self.scopes: list[Scope] = []
        self.messages: list[Message] = []
        self.errors: list[ProxyError] = []
        self.receives: list[Receive] = []
        self.counts: list[int] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Any) -> None:
        self.scopes.append(scope)
        self.receives.append(receive)
        if self.inflight is not None:
            self.counts.append(self.inflight.count)
        try:
            for _ in range(self.reads):
                self.messages.append(await receive())
        except ProxyError as err:
            self.errors.append(err)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok", "more_body": False})


class Client:
    """One request's `receive` (its messages, then disconnects) and what was sent back."""

    def __init__(self, *chunks: bytes, end: Message | None = None) -> None:
        self.queue: list[Message] = [
            {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
            for i, chunk in enumerate(chunks)
        ]
        if end is not None:
            self.queue[-1]["more_body"] = True
            self.queue.append(end)
        self.reads = 0
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        self.reads += 1
        return self.queue.pop(0) if self.queue else {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        status: int = self.sent[0]["status"]
        return status

    @property
    def headers(self) -> Headers:
        headers: Headers = self.sent[0]["headers"]
        return headers

    @property
    def error(self) -> dict[str, Any]:
        error: dict[str, Any] = orjson.loads(self.sent[1]["body"])["error"]
        return error


def request(
    path: str = CHAT, headers: Headers | None = None, state: dict[str, Any] | None = None
) -> Scope:
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": headers if headers is not None else [],
        "state": state if state is not None else {},
    }


def keyed(key: str = KEY, *more: tuple[bytes, bytes]) -> Headers:
    return [(b"authorization", f"Bearer {key}".encode()), *more]


# -- what passes untouched -----------------------------------------------------------------


@pytest.mark.anyio
async def test_the_lifespan_passes_untouched_even_with_keys() -> None:
    app, client = App(reads=0), Client()
    scope: Scope = {"type": "lifespan", "state": {}}
    await Guard(app, config=config([KEY]))(scope, client.receive, client.send)
    assert app.scopes == [scope]
    assert app.scopes[0] is scope
    assert app.receives == [client.receive]


@pytest.mark.anyio
async def test_healthz_needs_no_key_and_keeps_its_scope() -> None:
    app, client = App(reads=0), Client()
    scope = request("/healthz", [(b"authorization", b"Bearer whatever")])
    await Guard(app, config=config([KEY]))(scope, client.receive, client.send)
    assert app.scopes[0] is scope
    assert client.status == 200


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "public", "let_in"),
    [
        ("/curator/requests", True, True),
        ("/curator/", True, True),
        ("/curator", True, False),  # only what is under the prefix
        ("/curatorx/requests", True, False),
        ("/curator/requests", False, False),
        ("/healthz/", True, False),
    ],
)
async def test_a_public_viewer_checks_its_own_keys(path: str, public: bool, let_in: bool) -> None:
    app, client = App(reads=0), Client()
    await Guard(app, config=config([KEY], public_viewer=public))(
        request(path), client.receive, client.send
    )
    assert (len(app.scopes) == 1) is let_in
    assert client.status == (200 if let_in else 401)


# -- proxy keys ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"authorization", b"Bearer ck-wrong")],
        [(b"authorization", KEY.encode())],
        [(b"authorization", f"Basic {KEY}".encode())],
        [(b"authorization", b"Bearer ")],
        [(b"x-api-key", b"ck-wrong"), (b"x-other-key", KEY.encode())],
        [(b"api-key", KEY.encode()), (b"authorization", b"Bearer ck-wrong")],
        [(b"authorization", b"Bearer ck-wrong"), (b"authorization", f"Bearer {KEY}".encode())],
    ],
    ids=["none", "wrong", "no-scheme", "basic", "empty", "other-header", "api-key", "second"],
)
async def test_a_missing_or_wrong_key_gets_401_and_is_counted(headers: Headers) -> None:
    app, client, rejections = App(), Client(b"{}"), Rejections()
    scope = request(headers=headers, state=rejections.state())
    await Guard(app, config=config([KEY, OTHER]))(scope, client.receive, client.send)
    assert app.scopes == []
    assert client.reads == 0  # the body is never read
    assert client.status == 401
    body = client.sent[1]["body"]
    assert client.headers == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b"Bearer"),
    ]
    assert client.sent[1]["more_body"] is False
    assert client.error == {
        "message": "Missing or invalid proxy key. Send it as 'Authorization: Bearer <key>' "
        "(or, from an Anthropic client, as 'x-api-key: <key>').",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_proxy_key",
    }
    assert KEY.encode() not in body
    assert rejections.reasons == ["invalid_proxy_key"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "credential"),
    [
        (keyed(KEY), f"Bearer {KEY}"),
        (keyed(OTHER), f"Bearer {OTHER}"),
        ([(b"authorization", f"bearer  {KEY} ".encode())], f"bearer  {KEY} "),
        ([(b"api-key", KEY.encode())], f"Bearer {KEY}"),
    ],
    ids=["first", "second", "loose", "azure"],
)
async def test_a_right_key_is_let_in_and_its_headers_stop_here(
    headers: Headers, credential: str
) -> None:
    app, client = App(), Client(b"{}")
    around = [(b"x-team", b"agents"), *headers, (b"content-type", b"application/json")]
    scope = request(headers=around)
    await Guard(app, config=config([KEY, OTHER]))(scope, client.receive, client.send)
    (seen,) = app.scopes
    assert seen["headers"] == [(b"x-team", b"agents"), (b"content-type", b"application/json")]
    assert seen[PROXY_CREDENTIAL] == credential.encode()
    assert scope["headers"] == around  # the server's own scope is left as it was
    assert PROXY_CREDENTIAL not in scope
    assert client.status == 200


@pytest.mark.anyio
async def test_both_credential_headers_are_removed_when_authorization_is_right() -> None:
    app, client = App(), Client(b"{}")
    headers = [(b"api-key", b"az-anything"), *keyed(KEY)]
    await Guard(app, config=config([KEY]))(request(headers=headers), client.receive, client.send)
    assert app.scopes[0]["headers"] == []
    assert app.scopes[0][PROXY_CREDENTIAL] == f"Bearer {KEY}".encode()


@pytest.mark.anyio
async def test_without_keys_credentials_pass_through_and_nothing_is_added() -> None:
    app, client = App(), Client(b"{}")
    headers = [(b"authorization", b"Bearer sk-client-own"), (b"api-key", b"az-1")]
    await Guard(app, config=config())(request(headers=headers), client.receive, client.send)
    assert app.scopes[0]["headers"] == headers
    assert PROXY_CREDENTIAL not in app.scopes[0]


@pytest.mark.anyio
async def test_the_key_is_checked_before_the_body_size() -> None:
    app, client = App(), Client()
    headers = [(b"content-length", str(LIMIT + 1).encode())]
    await Guard(app, config=config([KEY]))(request(headers=headers), client.receive, client.send)
    assert client.status == 401


# -- body size -----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("path", [CHAT, "/metrics"])
async def test_a_content_length_over_the_limit_is_413_before_a_byte_is_read(path: str) -> None:
    app, client, rejections = App(), Client(b"x"), Rejections()
    headers = keyed(KEY, (b"content-length", str(LIMIT + 1).encode()))
    scope = request(path, headers, rejections.state())
    await Guard(app, config=config([KEY]))(scope, client.receive, client.send)
    assert app.scopes == []
    assert client.reads == 0
    assert client.status == 413
    assert client.error["code"] == "request_too_large"
    assert client.error["message"] == "The request body exceeds the proxy's limit of 1048576 bytes."
    assert (b"www-authenticate", b"Bearer") not in client.headers
    assert rejections.reasons == ["request_too_large"]


@pytest.mark.anyio
@pytest.mark.parametrize("length", [str(LIMIT), "0", "abc", "-5", " 99999999", "1e9", ""])
async def test_a_content_length_at_the_limit_or_not_a_number_is_let_through(length: str) -> None:
    app, client = App(), Client(b"{}")
    headers = [(b"content-length", length.encode())]
    await Guard(app, config=config())(request(headers=headers), client.receive, client.send)
    assert len(app.scopes) == 1
    assert client.status == 200


@pytest.mark.anyio
async def test_only_the_first_content_length_is_read() -> None:
    app, client = App(), Client(b"{}")
    headers = [(b"content-length", b"2"), (b"content-length", str(LIMIT + 1).encode())]
    await Guard(app, config=config())(request(headers=headers), client.receive, client.send)
    assert client.status == 200


@pytest.mark.anyio
async def test_off_v1_a_declared_length_leaves_receive_as_it_is() -> None:
    app, client = App(), Client(b"abc")
    headers = [(b"content-length", b"3")]
    await Guard(app, config=config())(request("/metrics", headers), client.receive, client.send)
    assert app.receives == [client.receive]


@pytest.mark.anyio
async def test_off_v1_a_chunked_body_at_the_limit_is_read_through() -> None:
    app, client = App(reads=3), Client(b"a" * (LIMIT - 1), b"b")
    await Guard(app, config=config())(request("/metrics"), client.receive, client.send)
    assert app.errors == []
    assert [len(m.get("body", b"")) for m in app.messages] == [LIMIT - 1, 1, 0]
    assert app.messages[-1] == {"type": "http.disconnect"}


@pytest.mark.anyio
async def test_off_v1_the_chunk_that_crosses_the_limit_raises_413_in_the_app() -> None:
    app, client, rejections = App(reads=3), Client(b"a" * LIMIT, b"b"), Rejections()
    scope = request("/metrics", state=rejections.state())
    await Guard(app, config=config())(scope, client.receive, client.send)
    assert len(app.messages) == 1
    (err,) = app.errors
    assert (err.status, err.code) == (413, "request_too_large")
    assert client.status == 200  # the app answered (and would record the exchange)
    assert rejections.reasons == []  # not the guard's own answer


# -- a proxied body is read before it takes a slot -----------------------------------------


@pytest.mark.anyio
async def test_a_proxied_body_reaches_the_app_as_one_message_then_the_connection() -> None:
    app, client = App(reads=2), Client(b'{"mo', b'del": ', b'"m"}')
    await Guard(app, config=config())(request(), client.receive, client.send)
    assert app.messages == [
        {"type": "http.request", "body": b'{"model": "m"}', "more_body": False},
        {"type": "http.disconnect"},  # the second read goes to the connection again
    ]
    assert client.reads == 4


@pytest.mark.anyio
async def test_a_proxied_body_of_exactly_the_limit_is_whole() -> None:
    app, client = App(), Client(b"a" * (LIMIT // 2), b"b" * (LIMIT // 2))
    await Guard(app, config=config())(request(), client.receive, client.send)
    assert app.errors == []
    assert app.messages[0]["body"] == b"a" * (LIMIT // 2) + b"b" * (LIMIT // 2)


@pytest.mark.anyio
async def test_a_body_the_app_has_read_is_not_held_by_the_guard() -> None:
    """The app frees it once sent upstream; the guard must not keep it for the exchange."""
    held: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Any) -> None:  # noqa: ARG001
        assert len((await receive())["body"]) == LIMIT
        await asyncio.sleep(0)
        held.append(held_from(guard_module.__file__))  # the body the guard joined

    client = Client(b"a" * (LIMIT // 2), b"b" * (LIMIT // 2))
    tracemalloc.start()
    try:
        await Guard(app, config=config())(request(), client.receive, client.send)
    finally:
        tracemalloc.stop()
    assert held[0] < LIMIT // 4


@pytest.mark.anyio
async def test_a_proxied_body_one_byte_over_stops_reading_and_raises_413_in_the_app() -> None:
    inflight = Inflight()
    app = App(inflight)
    client = Client(b"a" * LIMIT, b"b", b"never read")
    await Guard(app, config=config(), inflight=inflight)(request(), client.receive, client.send)
    assert client.reads == 2
    (err,) = app.errors
    assert (err.status, err.code) == (413, "request_too_large")
    assert app.counts == [0]  # no slot for a failed body
    assert inflight.count == 0


@pytest.mark.anyio
async def test_a_client_that_leaves_mid_body_reaches_the_app_as_a_disconnect() -> None:
    inflight = Inflight()
    app = App(inflight)
    client = Client(b'{"mo', end={"type": "http.disconnect"})
    await Guard(app, config=config(), inflight=inflight)(request(), client.receive, client.send)
    assert app.messages == [{"type": "http.disconnect"}]
    assert app.errors == []
    assert app.counts == [0]


@pytest.mark.anyio
async def test_a_body_the_connection_guard_timed_out_is_a_408_in_the_app() -> None:
    """The flag is set on the server's own scope, which a keyed request's copy is not."""
    inflight = Inflight()
    app = App(inflight)
    scope = request(headers=keyed())

    class TimedOut(Client):
        async def receive(self) -> Message:
            message = await super().receive()
            if message["type"] == "http.disconnect":
                scope[BODY_TIMED_OUT] = True  # as the connection guard does before closing
            return message

    client = TimedOut(b'{"mo', end={"type": "http.disconnect"})
    await Guard(app, config=config([KEY]), inflight=inflight)(scope, client.receive, client.send)
    (err,) = app.errors
    assert (err.status, err.code) == (408, "request_timeout")
    assert err.message == "The request body did not arrive within 2.5 seconds."
    assert app.counts == [0]


# -- max_inflight --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_proxied_request_holds_a_slot_while_the_app_runs() -> None:
    inflight = Inflight()
    inflight.count = 1  # one of max_inflight=2 already taken: this is the last slot
    app, client = App(inflight), Client(b"{}")
    await Guard(app, config=config(), inflight=inflight)(request(), client.receive, client.send)
    assert app.counts == [2]
    assert inflight.count == 1
    assert client.status == 200


@pytest.mark.anyio
async def test_past_max_inflight_a_fast_503_with_retry_after() -> None:
    inflight, rejections = Inflight(), Rejections()
    inflight.count = 2
    app, client = App(inflight), Client(b"{}")
    scope = request(state=rejections.state())
    await Guard(app, config=config(), inflight=inflight)(scope, client.receive, client.send)
    assert app.scopes == []
    assert client.status == 503
    body = client.sent[1]["body"]
    assert client.headers == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"),
    ]
    assert client.error["code"] == "proxy_overloaded"
    assert client.error["type"] == "server_error"
    assert rejections.reasons == ["proxy_overloaded"]
    assert inflight.count == 2


@pytest.mark.anyio
async def test_a_failed_body_is_never_refused_as_overload() -> None:
    """The app records a too-large body even when every slot is taken."""
    inflight = Inflight()
    inflight.count = 2
    app, client = App(inflight), Client(b"a" * (LIMIT + 1))
    await Guard(app, config=config(), inflight=inflight)(request(), client.receive, client.send)
    assert [e.code for e in app.errors] == ["request_too_large"]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["/metrics", "/v1", "/nowhere", "/healthz"])
async def test_paths_outside_v1_are_not_counted(path: str) -> None:
    inflight = Inflight()
    inflight.count = 2
    app, client = App(inflight), Client(b"")
    await Guard(app, config=config(), inflight=inflight)(request(path), client.receive, client.send)
    assert app.counts == [2]
    assert client.status == 200


@pytest.mark.anyio
async def test_the_slot_is_freed_when_the_app_fails() -> None:
    inflight = Inflight()

    async def failing(_scope: Scope, _receive: Receive, _send: Any) -> None:
        assert inflight.count == 1
        raise RuntimeError("app failed")

    client = Client(b"{}")
    with pytest.raises(RuntimeError, match="app failed"):
        await Guard(failing, config=config(), inflight=inflight)(
            request(), client.receive, client.send
        )
    assert inflight.count == 0


# -- counting rejections -------------------------------------------------------------------


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"edge": None},
        {"edge": SimpleNamespace(current=None)},
        {"edge": SimpleNamespace(current=SimpleNamespace(metrics=None))},
    ],
    ids=["no-edge", "none", "no-current", "no-metrics"],
)
def test_a_rejection_without_live_metrics_is_not_an_error(state: dict[str, Any]) -> None:
    count_rejection(state, "invalid_proxy_key")


@pytest.mark.anyio
async def test_an_answer_without_lifespan_state_still_goes_out() -> None:
    client = Client()
    scope = request()
    del scope["state"]
    await Guard(App(), config=config([KEY]))(scope, client.receive, client.send)
    assert client.status == 401


def test_the_guards_reasons_are_known_metric_labels() -> None:
    assert {"invalid_proxy_key", "request_too_large", "proxy_overloaded"} <= set(REJECT_REASONS)


# -- the key ring and the presented credential ---------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "accepted"),
    [
        (f"Bearer {KEY}", True),
        (f"BEARER {KEY}", True),
        (f"  Bearer  {KEY}  ", True),
        (f"Bearer {KEY}\t", True),
        (f"Bearer {KEY} x", False),
        (f"Bearer{KEY}", False),
        (f"Token {KEY}", False),
        (KEY, False),
        ("Bearer", False),
        ("", False),
    ],
)
def test_the_ring_reads_a_bearer_value(authorization: str, accepted: bool) -> None:
    assert KeyRing([KEY]).accepts(authorization.encode()) is accepted


def test_an_empty_token_is_refused_even_if_an_empty_key_was_given() -> None:
    ring = KeyRing([""])
    assert ring  # a key is held...
    assert not ring.accepts(b"Bearer ")  # ...but an empty token never matches it
    assert not ring.accepts(None)


@pytest.mark.parametrize(
    ("headers", "credential"),
    [
        ([], None),
        ([(b"api-key", b"az-1")], b"Bearer az-1"),
        ([(b"authorization", b"Bearer sk-1")], b"Bearer sk-1"),
        ([(b"api-key", b"az-1"), (b"authorization", b"Bearer sk-1")], b"Bearer sk-1"),
        ([(b"authorization", b"Bearer a"), (b"authorization", b"Bearer b")], b"Bearer a"),
        ([(b"api-key", b"az-1"), (b"api-key", b"az-2")], b"Bearer az-1"),
        ([(b"Authorization", b"Bearer sk-1")], None),  # ASGI names are lower-case
        ([(b"authorization", b"")], b""),
    ],
)
def test_presented_credential(headers: Headers, credential: bytes | None) -> None:
    assert presented_credential(headers) == credential


tokens = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40)


@settings(max_examples=100, deadline=None)
@given(st.lists(tokens, min_size=1, max_size=5, unique=True), tokens, st.data())
def test_the_ring_accepts_exactly_its_keys(
    keys: list[str], other: str, data: st.DataObject
) -> None:
    ring = KeyRing(keys)
    key = data.draw(st.sampled_from(keys))
    scheme = data.draw(st.sampled_from(["Bearer", "bearer", "BeArEr"]))
    assert ring.accepts(f"{scheme} {key}".encode())
    assert ring.accepts(presented_credential([(b"api-key", key.encode())]))
    assert ring.accepts(f"Bearer {other}".encode()) is (other in keys)


# -- the bind check ------------------------------------------------------------------------

KEYED_UP = UpstreamConfig("openai", "https://api.openai.com/v1", api_key="sk-up-secret")
ALSO_KEYED = UpstreamConfig("azure", "https://x.openai.azure.com/openai", api_key="az-secret")
LOCAL = UpstreamConfig("local", "http://127.0.0.1:8000/v1")


def test_a_refusal_names_the_source_host_and_every_keyed_upstream_but_no_key() -> None:
    reason = bind_refusal(config(upstreams=(KEYED_UP, LOCAL, ALSO_KEYED)), "0.0.0.0")
    assert reason is not None
    assert reason.startswith(
        "<guard>: refusing to listen on 0.0.0.0: upstream 'openai', 'azure' has an api_key"
    )
    assert "'local'" not in reason
    assert "secret" not in reason


@pytest.mark.parametrize(
    ("host", "auth", "refused"),
    [
        ("10.0.0.5", AuthConfig(), True),
        ("::", AuthConfig(), True),
        ("[::1]", AuthConfig(), False),
        ("localhost", AuthConfig(), False),
        ("10.0.0.5", AuthConfig(admin_keys=("adm",)), True),  # admin keys guard no upstream
        ("10.0.0.5", AuthConfig(keys=("k",)), False),
        ("10.0.0.5", AuthConfig(allow_unauthenticated=True), False),
    ],
)
def test_bind_refusal_with_a_keyed_upstream(host: str, auth: AuthConfig, refused: bool) -> None:
    assert (bind_refusal(config(upstreams=(KEYED_UP,), auth=auth), host) is not None) is refused


def test_no_keyed_upstream_is_never_refused() -> None:
    assert bind_refusal(config(upstreams=(LOCAL,)), "0.0.0.0") is None
    assert bind_refusal(config(), "0.0.0.0") is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.255.255.254", True),
        ("[127.0.0.1]", True),
        ("128.0.0.1", False),
        ("", False),
    ],
)
def test_is_loopback_edges(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
