"""The viewer as an ASGI app under a prefix: what reaches `Viewer.handle` (path, query,
headers, the login body, capped) and what goes back (status, headers, HEAD without a body)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from proxy.observability.audit.readers.query import BadInput
from proxy.observability.audit.sinks.base import StoreUnavailable
from proxy.viewer.app import Viewer
from proxy.viewer.asgi import ViewerApp
from proxy.viewer.auth import AdminKeys
from proxy.viewer.store import opener
from proxy.viewer.wire import MAX_BODY_BYTES, SECURITY_HEADERS, TEXT, Reply, ViewRequest

PREFIX = "/curator"


class Recorder:
    """A stand-in viewer: answers `reply` and remembers each request and its thread."""

    def __init__(self, reply: Reply | None = None) -> None:
        self.reply = reply or Reply(200, b"hello", TEXT, (("x-extra", "1"),))
        self.requests: list[ViewRequest] = []
        self.threads: list[int] = []

    def handle(self, request: ViewRequest) -> Reply:
        self.requests.append(request)
        self.threads.append(threading.get_ident())
        return self.reply


class Exchange:
    """One request through the app: the messages it sent, and how much body it read."""

    def __init__(self, app: ViewerApp, body: Iterable[dict[str, Any]] = ()) -> None:
        self.app = app
        self.incoming = list(body)
        self.read = 0
        self.sent: list[dict[str, Any]] = []
        self.loop_thread = 0

    async def receive(self) -> dict[str, Any]:
        self.read += 1
        if self.read > len(self.incoming):
            return {"type": "http.disconnect"}
        return self.incoming[self.read - 1]

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def run(self, method: str, path: str, query: bytes = b"", headers: Any = ()) -> Exchange:
        scope = {"type": "http", "method": method, "path": path, "query_string": query,
                 "headers": list(headers)}  # fmt: skip

        async def go() -> None:
            self.loop_thread = threading.get_ident()
            await self.app(scope, self.receive, self.send)

        asyncio.run(go())
        return self

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> list[tuple[str, str]]:
        return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in self.sent[0]["headers"]]

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


def app_for(viewer: Recorder) -> ViewerApp:
    return ViewerApp(cast(Viewer, viewer), PREFIX)


def test_the_prefix_is_cut_and_the_query_kept() -> None:
    viewer = Recorder()
    Exchange(app_for(viewer)).run("GET", f"{PREFIX}/requests", b"route=chat&q=a%20b&route=x")
    [request] = viewer.requests
    assert request.method == "GET"
    assert request.path == "/requests"
    assert dict(request.query) == {"route": "x", "q": "a b"}  # last value wins
    assert request.body == b""


def test_the_bare_prefix_is_the_root() -> None:
    viewer = Recorder()
    Exchange(app_for(viewer)).run("GET", PREFIX)
    assert viewer.requests[0].path == "/"


def test_header_names_are_lowercased_and_latin1_decoded() -> None:
    viewer = Recorder()
    headers = [(b"Authorization", b"Bearer k"), (b"X-Name", "caf\u00e9".encode("latin-1"))]
    Exchange(app_for(viewer)).run("GET", f"{PREFIX}/overview", headers=headers)
    assert dict(viewer.requests[0].headers) == {"authorization": "Bearer k", "x-name": "caf\u00e9"}


def test_the_viewer_runs_off_the_event_loop() -> None:
    viewer = Recorder()
    exchange = Exchange(app_for(viewer)).run("GET", f"{PREFIX}/requests")
    assert viewer.threads[0] != exchange.loop_thread


def test_a_get_never_reads_the_body() -> None:
    exchange = Exchange(app_for(Recorder()), [{"type": "http.request", "body": b"x"}])
    exchange.run("GET", f"{PREFIX}/requests")
    assert exchange.read == 0


def test_a_post_body_is_joined_from_its_chunks() -> None:
    viewer = Recorder()
    chunks = [
        {"type": "http.request", "body": b"key=abc", "more_body": True},
        {"type": "http.request", "body": b"&next=%2Fx", "more_body": True},
        {"type": "http.request", "body": b"", "more_body": False},
        {"type": "http.request", "body": b"never read"},
    ]
    exchange = Exchange(app_for(viewer), chunks).run("POST", f"{PREFIX}/login")
    assert viewer.requests[0].body == b"key=abc&next=%2Fx"
    assert exchange.read == 3


def test_an_oversized_post_is_read_only_just_past_the_limit() -> None:
    viewer = Recorder()
    chunk = {"type": "http.request", "body": b"k" * 1000, "more_body": True}
    exchange = Exchange(app_for(viewer), [chunk] * 1000).run("POST", f"{PREFIX}/login")
    body = viewer.requests[0].body
    assert MAX_BODY_BYTES < len(body) <= MAX_BODY_BYTES + 1000
    assert exchange.read == len(body) // 1000


def test_a_client_that_goes_away_mid_body_ends_the_read() -> None:
    viewer = Recorder()
    chunk = {"type": "http.request", "body": b"key=", "more_body": True}
    exchange = Exchange(app_for(viewer), [chunk]).run("POST", f"{PREFIX}/login")
    assert viewer.requests[0].body == b"key="
    assert exchange.read == 2  # the chunk, then the disconnect


def test_the_reply_carries_its_headers_security_headers_and_length() -> None:
    exchange = Exchange(app_for(Recorder())).run("GET", f"{PREFIX}/requests")
    assert exchange.status == 200
    assert exchange.body == b"hello"
    headers = exchange.headers
    assert headers[0] == ("content-type", TEXT)
    assert set(SECURITY_HEADERS) <= set(headers)
    assert ("x-extra", "1") in headers
    assert ("content-length", "5") in headers
    assert [m["type"] for m in exchange.sent] == ["http.response.start", "http.response.body"]


def test_head_sends_the_length_but_no_body() -> None:
    viewer = Recorder()
    exchange = Exchange(app_for(viewer)).run("HEAD", f"{PREFIX}/requests")
    assert viewer.requests[0].method == "HEAD"
    assert exchange.body == b""
    assert ("content-length", "5") in exchange.headers


def test_a_real_viewer_under_the_prefix(store_paths: tuple[Path, Path]) -> None:
    viewer = Viewer(opener(str(store_paths[0])), AdminKeys(()), prefix=PREFIX)
    app = ViewerApp(viewer, PREFIX)
    root = Exchange(app).run("GET", PREFIX + "/")
    assert root.status == 303
    assert ("location", f"{PREFIX}/requests") in root.headers
    listed = Exchange(app).run("GET", f"{PREFIX}/requests", b"route=chat&status=429")
    assert listed.status == 200
    page = listed.body.decode()
    assert 'data-id="d000000000"' in page
    assert 'data-id="a000000000"' not in page
    assert f'href="{PREFIX}/requests/d000000000"' in page
    assert Exchange(app).run("GET", f"{PREFIX}/nowhere").status == 404
    assert Exchange(app).run("DELETE", f"{PREFIX}/requests").status == 405


def test_the_path_reaches_the_viewer_encoded_as_on_the_admin_listener() -> None:
    # The viewer decodes a record id once: a path decoded by the server as well would be
    # decoded twice, and its `%3F` would start a query.
    viewer = Recorder()
    app = app_for(viewer)
    for scope_extra in ({"raw_path": b"/curator/requests/ab%3Fc%2525"}, {}):
        exchange = Exchange(app)
        scope = {"type": "http", "method": "GET", "path": "/curator/requests/ab?c%25",
                 "query_string": b"", "headers": [], **scope_extra}  # fmt: skip
        asyncio.run(app(scope, exchange.receive, exchange.send))
    assert [r.path for r in viewer.requests] == ["/requests/ab%3Fc%2525"] * 2
    assert [dict(r.query) for r in viewer.requests] == [{}, {}]


def test_store_problems_and_bugs_are_answered_on_the_client_port_too() -> None:
    # viewer.public: the same pages as on the admin listener, never an exception to the server.
    def down() -> Any:
        raise StoreUnavailable("postgres: connection refused")

    def bad() -> Any:
        raise BadInput("PostgreSQL text fields cannot contain NUL (0x00) bytes")

    def bug() -> Any:
        raise RuntimeError("a reader bug")

    answers = {}
    for name, open_reader in (("down", down), ("bad", bad), ("bug", bug)):
        app = ViewerApp(Viewer(open_reader, AdminKeys(()), prefix=PREFIX), PREFIX)
        answers[name] = Exchange(app).run("GET", f"{PREFIX}/requests")
    assert answers["down"].status == 503
    assert "connection refused" in answers["down"].body.decode()
    assert answers["bad"].status == 400
    assert answers["bug"].status == 500
    rid = dict(answers["bug"].headers)["x-curator-request-id"]
    assert f"<code>{rid}</code>" in answers["bug"].body.decode()
