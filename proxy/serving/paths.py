"""What a proxied request may ask for: its method, and a path in normal form.

The upstream must see the very path the proxy routed, curated and audited. Servers differ
in what they do with a path before routing it: most resolve `.` and `..` segments, many
merge `//`, some decode `%2F` into a separator or `%2E` into a dot, Windows-style ones
read `\\` as `/`, Java ones drop `;parameters` from a segment, a few decode twice. Any of
those turns one path into another: `/v1/../../tenant-b/v1/models` leaves `base_url`'s path
with its key, and `/v1//chat/completions` reaches chat completions without curation. So
the proxy forwards only paths that every such server reads the same way, and answers
anything else with 400 `invalid_path` instead of guessing.

A path is in normal form when, as the client sent it (the raw path, still encoded):
- every segment is non-empty (no `//`, no trailing `/`) and none is only dots (`.`, `..`,
  and `...`, which some Windows servers read as `..`);
- every byte is an RFC 3986 path character, `;` excepted;
- every `%` starts a two-hex-digit escape, and no escape encodes a character that has
  its own meaning or must appear as itself: `/`, `\\`, `.`, `%`, `;`, a control character,
  or any other unreserved character (letters, digits, `-`, `_`, `~`);
- the escapes decode to UTF-8 (no overlong forms), and no encoded character becomes
  `/`, `\\`, `.`, `;` or `%` under Unicode normalization (NFKC).

Escapes of other characters (`%20`, `%3A`, UTF-8 such as `%C3%A9`) stay allowed: decoding
them cannot create a separator or a dot segment.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from unicodedata import normalize
from urllib.parse import quote, unquote_to_bytes

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from proxy.errors import JSON_HEADERS, ProxyError, invalid_path, method_not_allowed, unknown_path
from proxy.types import Scope

PROXIED_PREFIX = b"/v1/"

ALLOWED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
"""Forwarded methods. OpenAI's API uses GET, POST and DELETE; PUT and PATCH are plain
request/response methods that OpenAI-compatible vendor APIs use for updates; HEAD and
OPTIONS (CORS preflight) only ask about a resource. Everything else is refused with 405:
TRACE echoes the request back, injected upstream Authorization included; CONNECT asks
for a tunnel (and aiohttp would rewrite its target into the upstream's authority);
WebDAV and extension methods mean nothing to these APIs and some servers route an
unknown method like GET."""
_ALLOWED = frozenset(ALLOWED_METHODS)
_ORDER = {method: n for n, method in enumerate(ALLOWED_METHODS)}

PATH_CHARS = "-._~!$&'()*+,=:@/"
"""Besides letters, digits and `%`: RFC 3986's unreserved characters, sub-delims without
`;`, `:`, `@`, and `/` between segments."""
KEPT_AS_IS = frozenset(
    [*range(0x20), 0x7F, *b"/\\%;.-_~", *range(0x30, 0x3A), *range(0x41, 0x5B), *range(0x61, 0x7B)]
)
"""Octets that must never arrive percent-encoded (see the module docstring)."""
LOOKALIKE_OF = frozenset("/\\.;%")
"""Characters an encoded non-ASCII character must not turn into under NFKC, as a server
that normalizes Unicode would do (U+FF0E, the fullwidth full stop, becomes '.')."""

_CHAR = rb"[A-Za-z0-9" + re.escape(PATH_CHARS.replace("/", "").encode()) + rb"]"
_NORMAL = re.compile(rb"(?:/(?!\.++(?:/|\Z))(?:" + _CHAR + rb"++|%[0-9A-Fa-f]{2})++)++")
"""Non-empty segments that are not dots only, of path characters and escapes; the
possessive quantifiers keep a mismatch linear (a path is client input)."""


def _escapes_of(octets: frozenset[int]) -> bytes:
    """A pattern matching `%XX` for exactly `octets`, hex digits in either case."""
    alternatives = []
    for high in range(16):
        lows = sorted(n & 15 for n in octets if n >> 4 == high)
        if lows:
            digits = "".join(f"{low:X}{low:x}" if low > 9 else str(low) for low in lows)
            alternatives.append(f"{high:X}[{digits}]")
    return ("%(?:" + "|".join(alternatives) + ")").encode()


_KEPT_ESCAPE = re.compile(_escapes_of(KEPT_AS_IS))
_PROBLEMS = re.compile(
    rb"(?P<empty>//|/\Z)"
    rb"|(?P<dot>/\.++(?:/|\Z))"
    rb"|(?P<malformed>%(?![0-9A-Fa-f]{2}))"
    rb"|(?P<escape>" + _escapes_of(KEPT_AS_IS) + rb")"
    rb"|(?P<char>[^%/" + _CHAR[1:-1] + rb"])"
)

REASONS = {
    "empty": "has an empty segment ('//' or a trailing '/')",
    "dot": "has a segment of dots only ('.', '..', ...)",
    "char": "has a character that is not allowed there unencoded (such as '\\', ';' or '|')",
    "malformed": "has a '%' that does not start a two-digit percent-escape",
    "escape": (
        "percent-encodes a character that must be sent as itself or not at all "
        "('/', '\\', '.', '%', ';', a letter, a digit, '-', '_', '~' or a control character)"
    ),
    "utf8": "percent-encodes bytes that are not UTF-8 (such as the overlong '%C0%AE')",
    "lookalike": (
        "percent-encodes a character that Unicode normalization turns into '/', '\\', '.', "
        "';' or '%' (such as a fullwidth full stop, %EF%BC%8E)"
    ),
}


def path_problem(raw: bytes) -> str | None:
    """Why `raw` (a request path as sent, without the query) is not in normal form, or
    None when it is. The reason is one of `REASONS`' keys."""
    if _NORMAL.fullmatch(raw) is not None:
        return _escape_problem(raw) if b"%" in raw else None
    found = _PROBLEMS.search(raw)  # only refused paths pay for finding out why
    return found.lastgroup if found is not None else "char"


def _escape_problem(raw: bytes) -> str | None:
    """What is wrong with the well-formed escapes of a path, if anything."""
    if _KEPT_ESCAPE.search(raw) is not None:
        return "escape"
    try:
        text = unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:  # overlong forms too: old decoders read %C0%AE as '.'
        return "utf8"
    for char in text:
        if not char.isascii() and not LOOKALIKE_OF.isdisjoint(normalize("NFKC", char)):
            return "lookalike"
    return None


def raw_path(scope: Scope) -> bytes:
    """The path as the client sent it; re-encoded from `path` for a server that gives no
    `raw_path` (the ASGI spec makes it optional), so the same checks apply."""
    raw: bytes | None = scope.get("raw_path")
    if raw is not None:
        return raw
    return quote(scope["path"], safe=PATH_CHARS).encode("ascii")


def checked_target(scope: Scope) -> bytes:
    """The raw path of a proxied request, once its method and path are fit to forward.

    Raises 405 `method_not_allowed` or 400 `invalid_path`.
    """
    if scope["method"] not in _ALLOWED:
        raise method_not_allowed(ALLOWED_METHODS)
    return checked_path(scope)


def checked_path(scope: Scope) -> bytes:
    """The raw path of a proxied request or WebSocket session, once it is fit to forward.

    Raises 400 `invalid_path`.
    """
    raw = raw_path(scope)
    problem = path_problem(raw)
    if problem is None and not raw.startswith(PROXIED_PREFIX):
        problem = "escape"  # only an escape in `/v1/` itself can decode into that prefix
    if problem is not None:
        raise invalid_path(REASONS[problem])
    return raw


ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


def error_handlers(served: tuple[str, ...]) -> Mapping[int, ErrorHandler]:
    """Starlette's 404 and 405 (for paths outside `/v1/`) in OpenAI's error shape, so a
    client with a wrong base URL gets an error it can show; `served` names the paths this
    listener answers besides `/v1/*`."""
    not_found = unknown_path(served)

    async def on_404(_request: Request, _exc: Exception) -> Response:
        return _response(not_found)

    async def on_405(_request: Request, exc: Exception) -> Response:
        headers = exc.headers if isinstance(exc, HTTPException) else None
        allowed = {m.strip() for m in (headers or {}).get("Allow", "GET").split(",")}
        # Starlette lists a route's methods from a set: put them in a stable order.
        listed = sorted(allowed, key=lambda m: (_ORDER.get(m, len(_ORDER)), m))
        return _response(method_not_allowed(tuple(listed)))

    return {404: on_404, 405: on_405}


def _response(err: ProxyError) -> Response:
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in (*JSON_HEADERS, *err.headers)}
    return Response(err.body(), err.status, headers)
