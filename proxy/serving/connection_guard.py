"""The connection guard: uvicorn's httptools protocol plus what it lacks against abusive
clients, enforced per connection before any request reaches the app (so before any key
is checked):

- a request head (request line and headers) over `server.max_header_kb` gets 431 and the
  connection is closed. Bytes are counted as they arrive, so a connection never buffers
  much more than the limit (plus one socket read) however long the head is;
- a head must be complete `header_timeout_s` after the connection opened or the previous
  response ended, else the connection is closed (clients that never send, header
  dribblers, idle keep-alive connections too: uvicorn's `timeout_keep_alive` closes those
  even sooner);
- a body must be complete `body_timeout_s` after its head, else 408 and close;
- the head is frozen once it is complete: a chunked body's trailers are dropped, and past
  `max_header_kb` get 431 (`proxy.serving.trailers`);
- past `max_connections` open connections in this worker, a new connection first evicts
  the one that has waited longest for its first head (never served: an idle or dribbling
  client, typically an attacker's), so a new client or health probe still gets in during
  an idle flood; when every connection has been served (keep-alive clients), the new one
  gets a fast 503 and is closed, so the connections already served keep working.

Each connection holds one timer that checks a deadline when it fires and re-arms itself,
so a request costs a clock read and a few attribute writes, not a timer of its own.
"""

from __future__ import annotations

import asyncio
import itertools
from asyncio import TimerHandle
from operator import attrgetter
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from proxy.serving.conn_limits import (
    BODY_TIMED_OUT,
    EVICTION_SCAN,
    LINGER_S,
    ConnLimits,
    closing_response,
    request_header_too_large,
    request_timeout,
    too_many_connections,
)
from proxy.serving.guard import count_rejection
from proxy.serving.trailers import TrailerGuard

HEAD, BODY, APP, LINGER, REFUSING = range(5)
"""Waiting for a head; for the rest of a body; for the app's response; closing; holding a
refused pipelined head until the response being sent is out."""


class HeadTooLarge(Exception):
    """Raised out of the parser when a complete head turns out to be over the limit."""


class GuardedHttpToolsProtocol(TrailerGuard):
    """`HttpToolsProtocol` with the limits of the module docstring. uvicorn builds one per
    connection: pass it as `http=functools.partial(GuardedHttpToolsProtocol, limits=...)`.

    Its own fields are slots: in the instance's `__dict__` they would take uvicorn's 27
    attributes past the 30 an instance dict shares keys for (CPython 3.11), and every
    connection's dict would grow from ~0.3 to ~1.6 KB."""

    __slots__ = (
        "_deadline",
        "_head_bytes",
        "_limits",
        "_phase",
        "_served",
        "_timer",
        "_uncounted",
    )

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: ConnLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._limits = limits
        self._phase = HEAD
        self._deadline = 0.0
        self._head_bytes = 0
        self._uncounted = False
        """A message ended inside the current read: the bytes after it (a pipelined head)
        were counted before the count was reset, so a head is measured itself."""
        self._served = False
        self._timer: TimerHandle | None = None

    # -- connection ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self._limits.max_connections and not self._evict_idle():
            self.transport, self._phase = transport, LINGER
            count_rejection(self.app_state, "too_many_connections")
            transport.write(closing_response(too_many_connections()))
            transport.close()
            return
        super().connection_made(transport)
        self._deadline = self.loop.time() + self._limits.header_timeout_s
        self._timer = self.loop.call_at(self._deadline, self._on_timer)

    def _evict_idle(self) -> bool:
        """Close the connection that has waited longest for its first head, if one is found
        among the first `EVICTION_SCAN`; False when none (all of those were served)."""
        idle = [
            conn
            for conn in itertools.islice(self.connections, EVICTION_SCAN)
            if isinstance(conn, GuardedHttpToolsProtocol)
            and conn._phase == HEAD
            and not conn._served
        ]
        if not idle:
            return False
        oldest = min(idle, key=attrgetter("_deadline"))
        count_rejection(self.app_state, "connection_evicted")
        self.connections.discard(oldest)  # its connection_lost comes later, and discards too
        oldest.transport.close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        phase = self._phase
        if phase >= LINGER:
            return  # dropped: see LINGER_S
        if phase != BODY:
            self._head_bytes += len(data)
        else:
            cycle = self.cycle
            buffered = len(cycle.body)
        self._uncounted = False
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
            if phase == BODY:
                body = len(cycle.body) - buffered
                self._count_trailers(cycle, len(data), body, self._head_limit)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            if self._phase == LINGER:  # on_headers_complete found the head too large
                if self.cycle is not None and not self.cycle.response_complete:
                    # Pipelined behind a response being sent: refused once that is out
                    # (`on_response_complete`), not in the middle of it.
                    self._phase = REFUSING
                    self.flow.pause_reading()
                    return
                self._refuse_head()
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return
        if self._head_bytes > self._limits.max_head_bytes:
            self._head_overflow()

    def _head_overflow(self) -> None:
        if self._phase == HEAD:
            self._refuse_head()
        elif self._phase == APP and self.flow is not None:
            # A pipelined head while a response is being sent: stop reading until it is
            # done (`on_response_complete` resumes and checks again).
            self.flow.pause_reading()

    def _refuse_head(self) -> None:
        self.headers, self.url = [], b""  # give back what the parser collected
        self._refuse(answer=True)

    def _refuse(self, *, answer: bool) -> None:
        """431 (`answer`: unless a response is on its way), then linger and close."""
        count_rejection(self.app_state, "request_header_too_large")
        self._phase = LINGER
        if answer:
            self.transport.write(closing_response(request_header_too_large(self._head_limit)))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._deadline = self.loop.time() + LINGER_S
        self._ensure_timer()

    @property
    def _head_limit(self) -> int:
        return self._limits.max_head_bytes

    # -- parser callbacks -----------------------------------------------------------------
    def _in_body(self) -> bool:
        return self._phase == BODY

    def on_headers_complete(self) -> None:
        too_many = self._head_bytes > self._head_limit or self._uncounted
        if too_many and self._head_size() > self._head_limit:
            self._phase = LINGER
            raise HeadTooLarge
        self._phase = BODY
        self._trailer_bytes = 0
        self._deadline = deadline = self.loop.time() + self._limits.body_timeout_s
        timer = self._timer
        if timer is None or timer.when() > deadline:  # inline: this runs on every request
            self._ensure_timer()
        TrailerGuard.on_headers_complete(self)  # faster than super() on 3.11

    def _head_size(self) -> int:
        # Counted bytes include any body that came with the head; measure the head itself.
        return len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)

    def on_message_complete(self) -> None:
        self._head_bytes = 0
        self._uncounted = True
        if self.parser.should_upgrade() and self._should_upgrade():
            self._phase = APP  # a WebSocket upgrade: the WebSocket protocol takes over
            return
        if self.cycle.response_complete and not self.pipeline:
            # Answered before its body ended (/healthz does not read one): wait for the
            # next head now, since `on_response_complete` has already run.
            self._await_head()
        else:
            self._phase = APP
        HttpToolsProtocol.on_message_complete(self)

    def on_response_complete(self) -> None:
        self._served = True
        phase = self._phase
        idle = phase == APP and not self.pipeline
        queued = phase == BODY and bool(self.pipeline)
        HttpToolsProtocol.on_response_complete(self)
        if self.transport.is_closing():
            return
        if phase == REFUSING:
            self._refuse_head()
        elif idle:
            self._await_head()
            if self._head_bytes > self._limits.max_head_bytes:
                self._refuse_head()
        elif queued:
            # A pipelined request's body could not be read while the response before it
            # was sent (uvicorn pauses reading): its deadline starts now.
            self._deadline = self.loop.time() + self._limits.body_timeout_s
            self._ensure_timer()

    def _await_head(self) -> None:
        self._phase = HEAD
        self._deadline = deadline = self.loop.time() + self._limits.header_timeout_s
        timer = self._timer
        if timer is None or timer.when() > deadline:
            self._ensure_timer()

    # -- the deadline -------------------------------------------------------------------
    def _ensure_timer(self) -> None:
        timer = self._timer
        if timer is None or timer.when() > self._deadline:
            if timer is not None:
                timer.cancel()
            self._timer = self.loop.call_at(self._deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        now, phase = self.loop.time(), self._phase
        if phase in (APP, REFUSING) or (phase == BODY and self.pipeline):
            # No deadline while the app answers (a pipelined body waits for that too);
            # look again later.
            self._timer = self.loop.call_at(now + self._limits.header_timeout_s, self._on_timer)
        elif now < self._deadline:
            self._timer = self.loop.call_at(self._deadline, self._on_timer)
        elif phase == HEAD:
            count_rejection(self.app_state, "header_timeout")
            self.transport.close()
        elif phase == BODY:
            self._body_timed_out()
        else:
            self.transport.close()  # LINGER is over

    def _body_timed_out(self) -> None:
        count_rejection(self.app_state, "request_timeout")
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            self.scope[BODY_TIMED_OUT] = True  # type: ignore[literal-required]
            self.transport.write(closing_response(request_timeout(self._limits.body_timeout_s)))
        self._phase = LINGER
        self.transport.close()
