"""Types that cross the proxy's packages: raw headers, an exchange's outcome, the ASGI
callables (as `starlette.types`, so that modules below serving need not import starlette)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Literal, Protocol

Headers = Sequence[tuple[bytes, bytes]]
"""Raw HTTP headers, names and values as their bytes, in order (ASGI's form)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

Outcome = Literal["ok", "client_disconnect", "upstream_error", "proxy_error"]
"""How one exchange ended.
ok: the upstream's response was relayed in full (whatever its status).
client_disconnect: the client left before the response ended; the upstream was closed.
upstream_error: the upstream failed (before or during the response).
proxy_error: the proxy answered with its own error (no route, too large, overflow reject).
"""


class Tap(Protocol):
    """Gets every response body chunk the relay forwards (the audit log's capture)."""

    def feed(self, chunk: bytes) -> None: ...
