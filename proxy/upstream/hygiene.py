"""URL and header hygiene between the client and the upstream.

URL mapping: a request for `/v1/<rest>?<query>` goes to `<base_url>/<rest>?<query>`, with
`<rest>` and `<query>` kept byte for byte (still percent-encoded). `base_url` has no
trailing slash and, for OpenAI, already ends in `/v1`. `<rest>` is the raw path that
`proxy.serving.paths` found in normal form, so it cannot climb out of `base_url`'s path, and the
upstream clients send the URL as given (see `proxy.upstream.client`).

Headers: hop-by-hop headers (RFC 9110 7.6.1: Connection, Keep-Alive, Proxy-*, TE,
Trailer(s), Transfer-Encoding, Upgrade, and any header named in Connection) are dropped
in both directions. Requests also lose the client's `x-curator-*` control headers, Host
and Content-Length (the client library sets both for the upstream), Expect (the
proxy has already read the whole body) and the path and method overrides (`OVERRIDES`).
Everything else passes unchanged.

Credentials: an upstream's `api_key` replaces the client's credential, sent as
`Authorization: Bearer` to an OpenAI-kind upstream and as `x-api-key` to an Anthropic one
(which then gets neither the client's `x-api-key` nor its `Authorization`). Without one, the
client's own goes through, except that an Anthropic credential (`sk-ant-...`, in any
credential header) never goes to an upstream of another kind.
"""

from __future__ import annotations

from typing import NamedTuple

from proxy.protocols.vendor import ANTHROPIC_KEY_PREFIX
from proxy.types import Headers

HOP_BY_HOP = frozenset(
    (b"connection", b"keep-alive", b"te", b"trailer", b"trailers", b"transfer-encoding", b"upgrade")
)
OVERRIDES = frozenset(
    (
        b"x-original-url",
        b"x-rewrite-url",
        b"x-http-method-override",
        b"x-http-method",
        b"x-method-override",
    )
)
"""Headers some servers (IIS, Symfony, Google front ends, method-override middleware) obey
instead of the request line: they would let an upstream route another path or method than
the one the proxy checked, routed and curated."""
REQUEST_DROPS = HOP_BY_HOP | OVERRIDES | {b"host", b"content-length", b"expect"}
DROPPED_PREFIXES = (b"proxy-", b"x-curator-")
"""Proxy-* is hop-by-hop; x-curator-* are the client's control headers for this proxy."""
EVENT_STREAM = b"text/event-stream"
PLAIN_CONNECTION = frozenset((b"keep-alive", b"Keep-Alive", b"close", b"Close"))
"""Connection values that name no header beyond the hop-by-hop ones."""


def upstream_url(base_url: str, target: bytes, query: bytes) -> str:
    """`/v1/<rest>` -> `<base_url>/<rest>`, query string appended unchanged.

    `target` is the raw path `proxy.serving.paths.checked_target` accepted: ASCII, starting with
    `/v1/`.
    """
    url = base_url + target[3:].decode("ascii")
    return f"{url}?{query.decode('latin-1')}" if query else url


class ResponseHead(NamedTuple):
    """The response headers to relay, and what the relay needs to know from them."""

    headers: list[tuple[bytes, bytes]]
    event_stream: bool
    content_length: int | None


def request_headers(
    headers: Headers, authorization: bytes | None, kind: str = "openai"
) -> list[tuple[bytes, bytes]]:
    """The client's headers as the upstream should see them (see the module docstring),
    with the upstream's own credential (`UpstreamConfig.authorization`) in place of the
    client's when set: the Authorization value for OpenAI's kind, the `x-api-key` value
    for Anthropic's. An Anthropic key never goes to an OpenAI-kind upstream.

    Names arrive lower-cased, as the ASGI spec has servers deliver them.
    """
    drop = REQUEST_DROPS
    anthropic = kind == "anthropic"
    for name, value in headers:
        if name == b"connection":
            drop = drop | _tokens(value)
        elif not anthropic and name in CREDENTIALS and _anthropic_key(value):
            drop = drop | {name}
    if authorization:
        drop = drop | (CREDENTIALS if anthropic else {b"authorization"})
    out = [(n, v) for n, v in headers if n not in drop and not n.startswith(DROPPED_PREFIXES)]
    if authorization:
        out.append((b"x-api-key" if anthropic else b"authorization", authorization))
    return out


CREDENTIALS = frozenset((b"authorization", b"x-api-key", b"api-key"))
"""Headers that carry an API key: Authorization (OpenAI, Anthropic OAuth), x-api-key
(Anthropic), api-key (Azure)."""


def _anthropic_key(value: bytes) -> bool:
    token = value.strip()
    if token[:7].lower() == b"bearer ":
        token = token[7:].lstrip()
    return token.startswith(ANTHROPIC_KEY_PREFIX)


def response_head(headers: Headers) -> ResponseHead:
    """The upstream's headers minus hop-by-hop ones, names lower-cased as ASGI wants."""
    out: list[tuple[bytes, bytes]] = []
    named: frozenset[bytes] = frozenset()
    event_stream, length = False, None
    for raw_name, value in headers:
        name = raw_name.lower()
        if name in HOP_BY_HOP or name.startswith(b"proxy-"):
            if name == b"connection":
                named |= _tokens(value)
            continue
        if name == b"content-type":
            event_stream = value.lower().startswith(EVENT_STREAM)
        elif name == b"content-length":
            length = int(value) if value.isdigit() else None
        out.append((name, value))
    if named - HOP_BY_HOP:  # rare: Connection names an end-to-end-looking header
        out = [(n, v) for n, v in out if n not in named]
    return ResponseHead(out, event_stream, length)


def _tokens(value: bytes) -> frozenset[bytes]:
    """The header names a Connection header lists (lower-cased)."""
    if value in PLAIN_CONNECTION:  # nearly every message: nothing beyond HOP_BY_HOP
        return frozenset()
    return frozenset(t.strip().lower() for t in value.split(b","))
