"""The relay: forwards one request upstream and its response to the client (URL and header
hygiene: `proxy.upstream.hygiene`; transport errors arrive already mapped by the client).

 response headers go to the client as soon as they arrive, then each body chunk as
it is read, with no re-framing. A watcher on the client's connection cancels the exchange
as soon as the client leaves (after the first 20 ms), which closes the upstream request
or response. When the audit log wants the body, `Relay.tap` gets each chunk as it goes
by (an append to a list; parsing happens in the audit writer's thread). When the exchange
is observed, the relay also keeps the response's last bytes (`Relay.tail`), from which the
request's protocol reads the upstream's token usage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from proxy.errors import ErrorStyle, ProxyError, upstream_failed
from proxy.protocols.base import USAGE_TAIL_BYTES
from proxy.types import Outcome, Receive, Send, Tap
from proxy.upstream.client import UpstreamClient, UpstreamRequest, UpstreamResponse
from proxy.upstream.head_checks import FINAL_STATUSES, NoFinalStatus, UnsendableHeader, unsendable
from proxy.upstream.hygiene import response_head
from proxy.upstream.safe_text import failure_reason, loggable_url

log = logging.getLogger("curator.forward")

SHUTDOWN = "shutdown"
"""Why a response ended when the server cancelled it: the shutdown grace period ran out."""
SSE_BOUNDARIES = (b"\n\n", b"\r\r", b"\r\n\r\n")
WATCH_AFTER_S = 0.02
"""How long an exchange runs before a task starts watching for the client leaving."""


def _cause(err: ProxyError) -> str:
    cause = err.__cause__
    return failure_reason(cause) if cause is not None else err.code


class StreamAborted(Exception):
    """The upstream failed mid-body on a non-SSE response: the client connection must drop.

    A truncated body must not look complete, and ASGI can only abort a response by the
    application raising, so this propagates to the server on purpose.
    """


# -- the relay --------------------------------------------------------------------------
@dataclass(slots=True)
class Relay:
    """What happened while forwarding one request; filled in as the exchange runs."""

    request_id: str
    """For log lines."""
    status: int | None = None
    first_byte_at: float | None = None
    outcome: Outcome = "ok"
    error: str | None = None
    complete: bool = False
    """The final body message has been handed to the server."""
    tap: Tap | None = None
    """Set by the app when the audit log wants the body: gets every relayed body chunk."""
    keep_tail: bool = False
    """Set by the app when the exchange is observed: keep the body's last bytes (`tail`)."""
    tail_parts: list[bytes] | None = None
    """The body's last chunks, at least `USAGE_TAIL_BYTES` of them when the body had that
    many (kept as chunks: joining per chunk would copy)."""
    tap_errors_only: bool = False
    """Keep the tap for error statuses (>= 400) only (the audit stores no responses)."""
    incomplete: str | None = None
    """Why the client got no complete response although the exchange began: the upstream
    failed mid-response (its error code), `client_disconnect` or `shutdown`. None when the
    response was complete, the proxy's own error answer included."""
    error_style: ErrorStyle = "openai"
    """The shape of the proxy's own errors: the API the client speaks."""

    def tail(self) -> bytes:
        """The response body's last `USAGE_TAIL_BYTES` (all of it when shorter)."""
        parts = self.tail_parts
        return b"".join(parts)[-USAGE_TAIL_BYTES:] if parts else b""


async def forward(
    client: UpstreamClient,
    request: UpstreamRequest,
    receive: Receive,
    send: Send,
    extra_headers: Sequence[tuple[bytes, bytes]],
    relay: Relay,
    loop: asyncio.AbstractEventLoop | None = None,
) -> None:
    """Send `request` upstream and relay the response to the ASGI `send`, noting in `relay`
    what happened. `loop` is the running loop, when the caller has it at hand: finding it
    costs a getpid() system call (see `Edge.loop`).

    Raises `ProxyError` when the upstream fails before its response starts (nothing has
    been sent to the client yet), and `StreamAborted` as described there. A client that
    leaves makes this return early with outcome `client_disconnect`.
    """
    loop = loop or asyncio.get_running_loop()
    task = asyncio.current_task(loop)
    if task is None:
        raise RuntimeError("forward() must run inside an asyncio task")
    watcher = _Watcher(loop, receive, task, relay)
    try:
        await _exchange(client, request, send, extra_headers, relay)
    except asyncio.CancelledError:
        if relay.outcome == "client_disconnect" and task.uncancel() == 0:
            return  # our own cancellation; the upstream side is closed by now
        # Not ours: the server cancels what is still running when its shutdown grace ends.
        relay.error = relay.error or SHUTDOWN
        relay.incomplete = relay.incomplete or SHUTDOWN
        raise
    except ProxyError as err:
        relay.outcome, relay.error = "upstream_error", err.code
        log.warning(
            "request %s: upstream %s failed (%s): answered %s",
            relay.request_id,
            loggable_url(request.url),
            _cause(err),
            err.code,
        )
        raise
    except StreamAborted:
        log.warning(
            "request %s: upstream failed mid-body; dropping the connection", relay.request_id
        )
        raise
    finally:
        watcher.stop(relay.complete)


class _Watcher:
    """Cancels the forwarding task when the client disconnects.

    The watching task starts only once the exchange has run for `WATCH_AFTER_S`: most
    fast answers are done by then and never pay for a task (measured ~5 us a request),
    while a client leaving a slow completion or a stream is still noticed at once.
    """

    __slots__ = ("_handle", "_job", "_loop", "_receive", "_relay", "_task")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        receive: Receive,
        task: asyncio.Task[Any],
        relay: Relay,
    ) -> None:
        self._loop, self._receive, self._task, self._relay = loop, receive, task, relay
        self._job: asyncio.Future[None] | None = None
        self._handle = loop.call_later(WATCH_AFTER_S, self._start)

    def _start(self) -> None:
        self._job = self._loop.create_task(self._watch())

    async def _watch(self) -> None:
        # The whole body has been read, so the next message is http.disconnect: the
        # client left, or (per the ASGI spec) the response completed.
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if not self._relay.complete:
            self._relay.outcome = "client_disconnect"
            self._relay.incomplete = "client_disconnect"
            self._task.cancel()

    def stop(self, complete: bool) -> None:
        self._handle.cancel()
        # After a complete response receive() reports http.disconnect and the watcher
        # ends by itself; cancelling it then would only cost an exception.
        if self._job is not None and not complete:
            self._job.cancel()


async def _exchange(
    client: UpstreamClient,
    request: UpstreamRequest,
    send: Send,
    extra_headers: Sequence[tuple[bytes, bytes]],
    relay: Relay,
) -> None:
    response = await client.send(request)
    request.body = b""  # sent: a stream would otherwise hold the bytes to its end
    try:
        if response.status not in FINAL_STATUSES:  # refused as if no response had come
            raise upstream_failed() from NoFinalStatus()
        relay.status = response.status
        if relay.tap_errors_only and response.status < 400:
            relay.tap = None
        head = response_head(response.headers)
        headers = head.headers
        if unsendable(headers):
            raise upstream_failed() from UnsendableHeader()
        headers.extend(extra_headers)
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await _pump(response, send, relay, sse=head.event_stream, length=head.content_length)
    finally:
        try:
            await response.aclose()
        except Exception:  # closing a failed connection may fail too; nothing to add
            log.debug("request %s: closing the upstream response failed", relay.request_id)


async def _pump(
    response: UpstreamResponse, send: Send, relay: Relay, *, sse: bool, length: int | None
) -> None:
    tail = b""
    remaining = length
    tap = relay.tap
    kept = _Tail(relay) if relay.keep_tail else None
    while True:
        try:
            chunk = await response.read()
        except ProxyError as err:
            relay.outcome, relay.error = "upstream_error", err.code
            relay.incomplete = err.code
            if not sse:
                raise StreamAborted(err.code) from err
            log.warning(
                "request %s: upstream failed mid-stream (%s); ended the stream with an SSE "
                "error event",
                relay.request_id,
                _cause(err),
            )
            relay.complete = True
            ends = tail.endswith(SSE_BOUNDARIES) or not tail
            body = sse_error_event(err, ends_event=ends, style=relay.error_style)
            if tap is not None:
                tap.feed(body)
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        if not chunk:
            break
        if relay.first_byte_at is None:
            relay.first_byte_at = perf_counter()
        if tap is not None:
            tap.feed(chunk)  # appends to a list: parsing waits for the audit thread
        if kept is not None:
            kept.add(chunk)
        if sse:
            tail = (tail + chunk[-4:])[-4:]
        if remaining is not None:
            remaining -= len(chunk)
            if remaining <= 0:
                # The whole promised body: end now rather than pay a read and an empty send.
                relay.complete = True
                await send({"type": "http.response.body", "body": chunk, "more_body": False})
                return
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    relay.complete = True
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Tail:
    """Keeps a response's last chunks, dropping the oldest while the rest hold enough."""

    __slots__ = ("_parts", "_size")

    def __init__(self, relay: Relay) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        relay.tail_parts = self._parts

    def add(self, chunk: bytes) -> None:
        parts = self._parts
        parts.append(chunk)
        self._size += len(chunk)
        while self._size - len(parts[0]) >= USAGE_TAIL_BYTES:
            self._size -= len(parts.pop(0))


def sse_error_event(err: ProxyError, *, ends_event: bool, style: ErrorStyle = "openai") -> bytes:
    """An SSE `error` event; a partial event already relayed is terminated first."""
    prefix = b"" if ends_event else b"\n\n"
    return prefix + b"event: error\ndata: " + err.body(style) + b"\n\n"
