"""The request head is frozen once it is complete: a chunked body's trailers never become
request headers, and a trailer section is bounded like a head.

uvicorn's httptools protocol appends trailer fields to the request's headers, which the
scope shares: read after the body, as routing (`match.headers`), the audit's client
fingerprint and the forwarded request read them, a trailer would beat the head's own
field. Here trailer fields are dropped, and what a body sends after its last body bytes
(the last chunk's framing, then its trailers) counts against `server.max_header_kb` as it
arrives: the parser buffers one field's value whole before handing it over, so counting
fields would come too late for one endless field. Past the limit the request gets 431.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from proxy.serving.conn_limits import TRAILERS_TOO_LARGE


class TrailerGuard(HttpToolsProtocol):
    """`HttpToolsProtocol` that drops trailer fields and bounds trailer bytes. The
    connection guard says when a body is being read (`_in_body`), counts each read in a
    body (`_count_trailers`) and answers (`_refuse`)."""

    __slots__ = ("_trailer_bytes",)

    def _in_body(self) -> bool:
        raise NotImplementedError

    def _refuse(self, *, answer: bool) -> None:
        """Answer 431 (if `answer`) and close."""
        raise NotImplementedError

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_body():  # in a body, a field is a trailer: dropped
            HttpToolsProtocol.on_header(self, name, value)

    def on_headers_complete(self) -> None:
        self._trailer_bytes = 0
        HttpToolsProtocol.on_headers_complete(self)

    def _count_trailers(self, cycle: Any, size: int, body: int, limit: int) -> None:
        """Count a read of `size` bytes, `body` of them body bytes, in `cycle`'s body.

        A read with body bytes restarts the count: the chunk framing between body bytes is
        at most a read's worth. What follows the last body bytes adds up across reads, so
        the bytes held for a trailer section stay within `limit` plus one read."""
        if not self._in_body() or self.cycle is not cycle or cycle.response_complete:
            return  # the body ended in this read, or the app no longer reads it
        if body:
            self._trailer_bytes = 0
            return
        self._trailer_bytes += size
        if self._trailer_bytes > limit:
            self.scope[TRAILERS_TOO_LARGE] = limit  # type: ignore[literal-required]
            cycle.disconnected = True  # as `connection_lost` does: the app's reads end now
            cycle.message_event.set()
            self._refuse(answer=not cycle.response_started)
