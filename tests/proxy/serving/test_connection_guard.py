"""The connection guard (connection_guard.py) on a fake transport and a fake clock: head size,
header and body deadlines, max_connections with eviction, and the raw answers it writes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from proxy.observability.metrics.labels import REJECT_REASONS
from proxy.serving import connection_guard as cg
from proxy.serving.conn_limits import (
    BODY_TIMED_OUT,
    ConnLimits,
    closing_response,
    request_header_too_large,
    request_timeout,
    too_many_connections,
)
from proxy.serving.connection_guard import LINGER_S, GuardedHttpToolsProtocol
from proxy.types import Message, Receive, Scope, Send

# Not here: the WebSocket upgrade branches (data_received's HttpParserUpgrade, and
# on_message_complete's upgrade) hand the transport to uvicorn's WebSocket protocol, which
# needs a real socket; tests/e2e/test_websocket.py covers them.

T0 = 1000.0
HEADER_S = 10.0
BODY_S = 30.0
HEAD_LIMIT = 1024
LIMITS = ConnLimits(
    max_head_bytes=HEAD_LIMIT, header_timeout_s=HEADER_S, body_timeout_s=BODY_S, max_connections=3
)
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
EPSILON = 0.001


class Transport(asyncio.Transport):
    """What the protocol writes, and whether it paused, half-closed or closed the socket."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False
        self.eof = False
        self.paused = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after close"
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        addresses = {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8080)}
        return addresses.get(name, default)


class App:
    """The app behind the guard. `mode`: "read" reads the whole body, waits for `gate` if
    set, then answers 200 "ok"; "answer" answers at once (as /healthz, body unread);
    "start" starts a chunked answer first, then reads the body (which may never come)
    and ends the answer as "read" does."""

    def __init__(self, mode: str = "read") -> None:
        self.mode = mode
        self.gate: asyncio.Event | None = None
        self.scopes: list[Scope] = []
        self.bodies: list[bytes] = []
        self.timed_out: list[bool] = []
        """For each request that saw a disconnect: whether its scope said the body timed out."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        if self.mode == "start":
            await send({"type": "http.response.start", "status": 200, "headers": []})
        if self.mode == "answer":
            await self._answer(send)
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.timed_out.append(bool(scope.get(BODY_TIMED_OUT)))
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        if self.gate is not None:
            await self.gate.wait()
        if self.mode == "start":
            await send({"type": "http.response.body", "body": b"ok", "more_body": False})
        else:
            await self._answer(send)

    @staticmethod
    async def _answer(send: Send) -> None:
        start: Message = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", b"2")],
        }
        await send(start)
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})


class Rejections:
    """The live edge's `rejected` family, as count_rejection reaches it: records reasons."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def labels(self, reason: str) -> SimpleNamespace:
        return SimpleNamespace(inc=lambda: self.reasons.append(reason))


class OrderedConnections(dict[Any, None]):
    """The server's set of connections, in the order they were added."""

    def add(self, conn: Any) -> None:
        self[conn] = None

    def discard(self, conn: Any) -> None:
        self.pop(conn, None)


class Worker:
    """One worker's server state, on an event loop whose clock the test moves."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.now = T0
        self.loop.time = lambda: self.now  # type: ignore[method-assign]
        self.state = ServerState()
        self.rejections = Rejections()
        metrics = SimpleNamespace(rejected=self.rejections)
        self.app_state: dict[str, Any] = {
            "edge": SimpleNamespace(current=SimpleNamespace(metrics=metrics))
        }
        self.conns: list[tuple[GuardedHttpToolsProtocol, Transport]] = []
        self.apps: list[App] = []

    def connect(
        self, app: App | None = None, limits: ConnLimits = LIMITS
    ) -> tuple[GuardedHttpToolsProtocol, Transport]:
        app = app or App()
        self.apps.append(app)
        config = Config(
            app=app,
            log_config=None,
            proxy_headers=False,
            lifespan="off",
            timeout_keep_alive=3600,  # uvicorn's own idle close stays out of the way
        )
        proto = GuardedHttpToolsProtocol(
            config, self.state, self.app_state, self.loop, limits=limits
        )
        transport = Transport()
        proto.connection_made(transport)
        self.conns.append((proto, transport))
        return proto, transport

    def run(self) -> None:
        """Let the loop run what is due (timers at or before `now`, the app's tasks)."""
        for _ in range(8):
            self.loop.run_until_complete(asyncio.sleep(0))

    def at(self, seconds: float) -> None:
        """Move the clock to `seconds` after T0 (never back) and run what is due."""
        assert T0 + seconds >= self.now
        self.now = T0 + seconds
        self.run()

    def feed(self, proto: GuardedHttpToolsProtocol, data: bytes) -> None:
        proto.data_received(data)
        self.run()

    def close(self) -> None:
        for app in self.apps:  # apps still answering finish (into a closed connection)
            if app.gate is not None:
                app.gate.set()
        for proto, transport in self.conns:
            if proto.parser is not None:  # not lost yet
                transport.closed = True
                proto.connection_lost(None)
        self.run()
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self.loop.close()


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker()
    yield w
    w.close()
    assert set(w.rejections.reasons) <= set(REJECT_REASONS)


def head(
    method: str = "GET", path: str = "/v1/models", headers: dict[str, str] | None = None
) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "host: proxy",
        *[f"{k}: {v}" for k, v in (headers or {}).items()],
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def post(body_length: int) -> bytes:
    return head("POST", "/v1/chat/completions", {"content-length": str(body_length)})


def lose(proto: GuardedHttpToolsProtocol, transport: Transport) -> None:
    """The connection's end, as the loop reports it after `transport.close()`."""
    transport.closed = True
    proto.connection_lost(None)


# -- the header deadline -------------------------------------------------------------------


def timer_at(proto: GuardedHttpToolsProtocol) -> float:
    """When the connection's one timer fires next, as an offset from T0."""
    assert proto._timer is not None
    return proto._timer.when() - T0


def test_a_new_connection_is_admitted_with_the_header_deadline(worker: Worker) -> None:
    proto, transport = worker.connect()
    assert proto in worker.state.connections
    assert timer_at(proto) == HEADER_S
    assert proto._phase == cg.HEAD
    assert (transport.written, transport.closed) == (b"", False)


def test_a_connection_costs_no_more_dict_than_uvicorns_own(worker: Worker) -> None:
    """The guard's fields are slots: in the instance dict they would push it past the keys
    CPython 3.11 shares between instances, ~1.3 KB more for every open connection."""
    proto, _ = worker.connect()
    plain = HttpToolsProtocol(proto.config, worker.state, worker.app_state, worker.loop)
    assert vars(proto).keys() == vars(plain).keys()
    assert sys.getsizeof(vars(proto)) <= sys.getsizeof(vars(plain))
    assert proto._phase == cg.HEAD  # the guard's own field, in its slot


def test_a_connection_that_sends_nothing_is_closed_at_the_header_deadline(worker: Worker) -> None:
    _, transport = worker.connect()
    worker.at(HEADER_S - EPSILON)
    assert not transport.closed
    worker.at(HEADER_S)
    assert transport.closed
    assert transport.written == b""  # closed without an answer
    assert worker.rejections.reasons == ["header_timeout"]


def test_a_dribbled_head_does_not_move_the_deadline(worker: Worker) -> None:
    proto, transport = worker.connect()
    for second, piece in [(3, b"GET /v1/mo"), (6, b"dels HTTP/1.1\r\n"), (9, b"host: p\r\nx-a: ")]:
        worker.at(second)
        worker.feed(proto, piece)
    assert timer_at(proto) == HEADER_S
    worker.at(HEADER_S)
    assert transport.closed
    assert worker.rejections.reasons == ["header_timeout"]


def test_a_served_connection_gets_the_header_deadline_again_from_its_answer(
    worker: Worker,
) -> None:
    proto, transport = worker.connect()
    worker.at(4)
    worker.feed(proto, head())
    assert transport.written == OK
    assert proto._phase == cg.HEAD
    assert proto._deadline == T0 + 4 + HEADER_S
    worker.at(4 + HEADER_S - EPSILON)  # past the first deadline: the timer re-armed
    assert not transport.closed
    assert timer_at(proto) == 4 + HEADER_S
    worker.feed(proto, b"GET /heal")  # the next head starts, and never ends
    worker.at(4 + HEADER_S)
    assert transport.closed
    assert worker.rejections.reasons == ["header_timeout"]


def test_a_keep_alive_connection_serves_request_after_request(worker: Worker) -> None:
    app = App()
    proto, transport = worker.connect(app)
    for i in range(1, 4):
        worker.at(i * (HEADER_S - EPSILON))  # each just before the deadline the last set
        worker.feed(proto, post(5) + b"hello")
        assert transport.written == OK * i
        assert proto._deadline == worker.now + HEADER_S
    assert app.bodies == [b"hello"] * 3
    assert not transport.closed
    assert worker.rejections.reasons == []


def test_no_deadline_runs_while_the_app_answers(worker: Worker) -> None:
    """A slow upstream is not a slow client."""
    app = App()
    app.gate = asyncio.Event()
    proto, transport = worker.connect(app)
    worker.feed(proto, post(2) + b"{}")
    assert proto._phase == cg.APP
    for second in (BODY_S, 2 * BODY_S, 4 * BODY_S):
        worker.at(second)
        assert not transport.closed
        assert timer_at(proto) > second  # it looks again later
    app.gate.set()
    worker.run()
    assert transport.written == OK
    assert proto._phase == cg.HEAD
    assert proto._deadline == T0 + 4 * BODY_S + HEADER_S
    assert worker.rejections.reasons == []


def test_a_lost_connection_drops_its_timer(worker: Worker) -> None:
    proto, transport = worker.connect()
    timer = proto._timer
    assert timer is not None
    lose(proto, transport)
    assert proto._timer is None
    assert timer.cancelled()
    assert proto not in worker.state.connections
    worker.at(2 * HEADER_S)
    assert worker.rejections.reasons == []


def test_a_timer_on_a_closing_connection_does_nothing(worker: Worker) -> None:
    proto, transport = worker.connect()
    transport.close()  # closed by someone else; connection_lost has not come yet
    worker.at(HEADER_S)
    assert worker.rejections.reasons == []
    assert proto._timer is None  # not re-armed


# -- the body deadline ---------------------------------------------------------------------


def test_a_body_not_complete_in_time_gets_408_and_the_app_hears_why(worker: Worker) -> None:
    app = App()
    proto, transport = worker.connect(app)
    worker.at(1)
    worker.feed(proto, post(10) + b'{"mo')
    assert proto._phase == cg.BODY
    assert proto._deadline == T0 + 1 + BODY_S
    assert timer_at(proto) == HEADER_S  # the earlier timer stays, and re-arms when it fires
    worker.at(HEADER_S)
    assert not transport.closed
    assert timer_at(proto) == 1 + BODY_S
    worker.at(1 + BODY_S - EPSILON)
    assert not transport.closed
    worker.at(1 + BODY_S)
    assert transport.written == closing_response(request_timeout(BODY_S))
    assert transport.closed
    assert app.scopes[0][BODY_TIMED_OUT] is True
    assert worker.rejections.reasons == ["request_timeout"]
    lose(proto, transport)
    worker.run()
    assert app.timed_out == [True]  # the app sees the disconnect as the 408
    assert app.bodies == []


def test_a_shorter_body_timeout_moves_the_timer_earlier(worker: Worker) -> None:
    limits = ConnLimits(HEAD_LIMIT, header_timeout_s=HEADER_S, body_timeout_s=2, max_connections=3)
    proto, transport = worker.connect(limits=limits)
    worker.at(1)
    worker.feed(proto, post(10))
    assert timer_at(proto) == 3
    worker.at(3)
    assert transport.written == closing_response(request_timeout(2))
    assert b"within 2 seconds" in transport.written


def test_a_body_that_arrives_in_pieces_in_time_is_served(worker: Worker) -> None:
    app = App()
    proto, transport = worker.connect(app)
    worker.feed(proto, post(6))
    for second, piece in [(10, b"ab"), (20, b"cd"), (BODY_S - EPSILON, b"ef")]:
        worker.at(second)
        worker.feed(proto, piece)
    assert app.bodies == [b"abcdef"]
    assert transport.written == OK
    assert BODY_TIMED_OUT not in app.scopes[0]
    worker.at(BODY_S)
    assert not transport.closed
    assert worker.rejections.reasons == []


def test_a_body_timeout_after_the_answer_started_writes_nothing_more(worker: Worker) -> None:
    app = App("start")
    proto, transport = worker.connect(app)
    worker.feed(proto, post(10) + b"{")
    started = transport.written
    assert started.startswith(b"HTTP/1.1 200 OK\r\n")
    worker.at(BODY_S)
    assert transport.closed
    assert transport.written == started  # no 408 inside a response already under way
    assert BODY_TIMED_OUT not in app.scopes[0]
    assert worker.rejections.reasons == ["request_timeout"]


def test_a_body_that_ends_after_its_answer_waits_for_the_next_head(worker: Worker) -> None:
    """/healthz answers before reading the body; its last bytes then start the header
    deadline, since the answer's own hook ran while the body was still due."""
    proto, transport = worker.connect(App("answer"))
    worker.feed(proto, head(headers={"content-length": "5"}))
    assert transport.written == OK
    assert proto._phase == cg.BODY
    worker.at(1)
    worker.feed(proto, b"12345")
    assert proto._phase == cg.HEAD
    assert proto._deadline == T0 + 1 + HEADER_S
    worker.at(1 + HEADER_S)
    assert transport.closed
    assert worker.rejections.reasons == ["header_timeout"]


# -- head size -----------------------------------------------------------------------------

REFUSED_HEAD = closing_response(request_header_too_large(HEAD_LIMIT))


def test_a_streamed_head_at_the_limit_is_read_one_byte_more_is_431(worker: Worker) -> None:
    app = App()
    proto, transport = worker.connect(app)
    start = b"GET /v1/models HTTP/1.1\r\nx-pad: "
    worker.feed(proto, start + b"a" * (HEAD_LIMIT - len(start)))
    assert transport.written == b""
    worker.at(1)
    worker.feed(proto, b"a")
    assert transport.written == REFUSED_HEAD
    assert transport.eof
    assert not transport.closed  # what the client still sends is read and dropped first
    assert proto._phase == cg.LINGER
    assert timer_at(proto) == 1 + LINGER_S
    assert worker.rejections.reasons == ["request_header_too_large"]
    worker.feed(proto, b"a" * 100_000 + b"\r\n\r\n\x00not http at all")
    assert transport.written == REFUSED_HEAD
    worker.at(1 + LINGER_S - EPSILON)
    assert not transport.closed
    worker.at(1 + LINGER_S)
    assert transport.closed
    assert app.scopes == []
    assert worker.rejections.reasons == ["request_header_too_large"]


def padded_head(size: int) -> bytes:
    """A complete GET head whose measured size (url, and name + value + 4 per header) is
    `size`; its bytes on the wire are 17 more."""
    return b"GET /u HTTP/1.1\r\nx-pad: " + b"a" * (size - 11) + b"\r\n\r\n"


def test_a_complete_head_is_measured_without_the_request_lines_framing(worker: Worker) -> None:
    app = App()
    proto, transport = worker.connect(app)
    data = padded_head(HEAD_LIMIT)
    assert len(data) == HEAD_LIMIT + 17  # more bytes than the limit came in...
    worker.feed(proto, data)
    assert transport.written == OK  # ...but the head itself is exactly the limit
    assert app.scopes[0]["path"] == "/u"


def test_a_complete_head_one_byte_over_is_431(worker: Worker) -> None:
    app = App()
    proto, transport = worker.connect(app)
    worker.feed(proto, padded_head(HEAD_LIMIT + 1))
    assert transport.written == REFUSED_HEAD
    assert proto._phase == cg.LINGER
    assert (proto.headers, proto.url) == ([], b"")  # what the parser collected is let go
    assert app.scopes == []
    assert worker.rejections.reasons == ["request_header_too_large"]


def test_a_body_that_comes_with_its_head_does_not_count_as_head(worker: Worker) -> None:
    app = App()
    proto, transport = worker.connect(app)
    body = b"x" * (4 * HEAD_LIMIT)
    worker.feed(proto, post(len(body) + 1) + body)  # one byte still to come
    assert proto._phase == cg.BODY
    assert transport.written == b""
    worker.feed(proto, b"y")
    assert app.bodies == [body + b"y"]
    assert transport.written == OK


def test_an_oversized_head_pipelined_behind_a_request_gets_431_after_its_answer(
    worker: Worker,
) -> None:
    app = App()
    app.gate = asyncio.Event()
    proto, transport = worker.connect(app)
    worker.feed(proto, post(2) + b"{}")
    assert proto._phase == cg.APP
    worker.feed(proto, b"GET /v1/models HTTP/1.1\r\nx-pad: " + b"a" * HEAD_LIMIT)
    assert transport.paused  # reading stops until the answer is out
    assert transport.written == b""
    app.gate.set()
    worker.run()
    assert transport.written == OK + REFUSED_HEAD
    assert transport.eof
    assert worker.rejections.reasons == ["request_header_too_large"]


def test_a_pipelined_head_under_the_limit_is_served_in_turn(worker: Worker) -> None:
    app = App()
    app.gate = asyncio.Event()
    proto, transport = worker.connect(app)
    worker.feed(proto, post(2) + b"{}" + post(3) + b"abc")
    app.gate.set()
    worker.run()
    assert transport.written == OK * 2
    assert app.bodies == [b"{}", b"abc"]
    assert worker.rejections.reasons == []


def test_a_malformed_request_still_gets_uvicorns_400(worker: Worker) -> None:
    proto, transport = worker.connect()
    worker.feed(proto, b"\x00\x01 not http\r\n\r\n")
    assert transport.written.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert transport.closed
    assert worker.rejections.reasons == []


# -- max_connections -----------------------------------------------------------------------


def test_up_to_max_connections_are_admitted(worker: Worker) -> None:
    conns = [worker.connect() for _ in range(LIMITS.max_connections)]
    assert len(worker.state.connections) == 3
    assert not any(t.closed for _, t in conns)
    assert worker.rejections.reasons == []


def test_past_the_cap_the_longest_waiting_idle_connection_is_evicted(worker: Worker) -> None:
    conns = []
    for second in range(3):
        worker.at(second)
        conns.append(worker.connect())
    worker.at(3)
    newer, newest = worker.connect(), worker.connect()
    assert [t.closed for _, t in conns] == [True, True, False]
    assert all(t.written == b"" for _, t in conns)  # an idle client gets no answer
    assert set(worker.state.connections) == {conns[2][0], newer[0], newest[0]}
    assert not newer[1].closed
    assert not newest[1].closed
    assert worker.rejections.reasons == ["connection_evicted"] * 2


def test_when_every_connection_is_busy_or_served_a_new_one_gets_503(worker: Worker) -> None:
    app = App()
    app.gate = asyncio.Event()
    served, _ = worker.connect()
    worker.feed(served, head())  # answered: a keep-alive client, back to waiting for a head
    busy, _ = worker.connect(app)
    worker.feed(busy, post(2) + b"{}")  # the app is answering it
    sending, _ = worker.connect()
    worker.feed(sending, post(10) + b"{")  # its body is still coming
    assert [p._phase for p in (served, busy, sending)] == [cg.HEAD, cg.APP, cg.BODY]
    refused, transport = worker.connect()
    assert transport.written == closing_response(too_many_connections())
    assert b"retry-after: 1\r\n" in transport.written
    assert transport.closed
    assert refused not in worker.state.connections
    assert len(worker.state.connections) == 3
    assert refused._phase == cg.LINGER
    assert refused._timer is None
    assert worker.rejections.reasons == ["too_many_connections"]
    refused.data_received(head())  # whatever still arrives is dropped
    lose(refused, transport)
    assert transport.written == closing_response(too_many_connections())


def test_an_evicted_connections_own_end_comes_later_and_is_harmless(worker: Worker) -> None:
    limits = ConnLimits(HEAD_LIMIT, HEADER_S, BODY_S, max_connections=1)
    old, old_transport = worker.connect(limits=limits)
    worker.at(1)
    new, _ = worker.connect(limits=limits)
    assert old_transport.closed
    lose(old, old_transport)
    assert set(worker.state.connections) == {new}
    worker.at(1 + HEADER_S)
    assert worker.rejections.reasons == ["connection_evicted", "header_timeout"]


@pytest.mark.parametrize(
    ("others", "evicted"), [(cg.EVICTION_SCAN - 1, True), (cg.EVICTION_SCAN, False)]
)
def test_eviction_looks_only_at_the_first_eviction_scan_connections(
    worker: Worker, others: int, evicted: bool
) -> None:
    """Connections of other kinds (a WebSocket's, say) fill the first places; an idle one
    behind them is found only within EVICTION_SCAN."""
    worker.state.connections = OrderedConnections()  # type: ignore[assignment]
    for _ in range(others):
        worker.state.connections.add(object())  # type: ignore[arg-type]
    limits = ConnLimits(HEAD_LIMIT, HEADER_S, BODY_S, max_connections=others + 1)
    _, idle = worker.connect(limits=limits)
    _, new = worker.connect(limits=limits)
    assert idle.closed is evicted
    assert new.closed is not evicted
    assert worker.rejections.reasons == (
        ["connection_evicted"] if evicted else ["too_many_connections"]
    )


# -- pipelining behind a response still being sent ----------------------------------------


def test_an_oversized_pipelined_head_is_refused_after_the_response_being_sent(
    worker: Worker,
) -> None:
    """The 431 follows the earlier response, never lands inside it, and the linger does
    not close the connection while that response is still going out."""
    app = App()
    app.gate = asyncio.Event()
    proto, transport = worker.connect(app)
    worker.feed(proto, post(2) + b"{}")
    big = head(headers={"x-big": "a" * (HEAD_LIMIT + 10)})
    worker.feed(proto, big)
    assert transport.written == b""
    assert not transport.eof
    worker.at(LINGER_S + HEADER_S + BODY_S)  # any deadline that could close it has passed
    assert not transport.closed
    app.gate.set()
    worker.run()
    assert transport.written.startswith(OK)
    refused = closing_response(request_header_too_large(HEAD_LIMIT))
    assert transport.written == OK + refused
    assert transport.eof
    assert worker.rejections.reasons == ["request_header_too_large"]


def test_a_pipelined_body_waits_for_the_response_being_sent_not_against_its_deadline(
    worker: Worker,
) -> None:
    """uvicorn reads no more while a response is going out, so a body queued behind a
    slow upstream is no slow client: its deadline starts when reading resumes."""
    app = App()
    app.gate = asyncio.Event()
    proto, transport = worker.connect(app)
    worker.feed(proto, post(2) + b"{}")
    worker.feed(proto, post(5) + b"he")  # the next request; the rest of its body waits
    worker.at(2 * BODY_S)
    assert transport.written == b""
    assert not transport.closed
    app.gate.set()
    worker.run()
    assert transport.written == OK
    assert proto._deadline == worker.now + BODY_S  # from now: reading has resumed
    worker.feed(proto, b"llo")
    worker.run()
    assert transport.written == OK + OK
    assert app.bodies == [b"{}", b"hello"]
    assert worker.rejections.reasons == []


def test_an_oversized_head_in_the_same_read_as_the_request_before_it_is_measured(
    worker: Worker,
) -> None:
    """The count restarts when a message ends; a head that came in the same read is then
    measured itself, or it would slip past the limit."""
    app = App()
    app.gate = asyncio.Event()
    proto, transport = worker.connect(app)
    worker.feed(proto, post(2) + b"{}" + head(headers={"x-big": "a" * (HEAD_LIMIT + 10)}))
    assert transport.written == b""
    app.gate.set()
    worker.run()
    assert transport.written == OK + closing_response(request_header_too_large(HEAD_LIMIT))
    assert len(app.scopes) == 1  # the oversized request never reached the app
    assert worker.rejections.reasons == ["request_header_too_large"]
