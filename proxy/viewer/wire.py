"""The viewer's own small request and reply types, free of any HTTP server library."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from urllib.parse import parse_qsl, urlsplit

HTML = "text/html; charset=utf-8"
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
MAX_BODY_BYTES = 4096
"""The only body the viewer reads is the login form."""
SECURITY_HEADERS = (
    # Nothing external, no inline script or style: an escaping slip cannot run code.
    (
        "content-security-policy",
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    # same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on the
    # login POST, which the origin check would refuse.
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
)


@dataclass(frozen=True, slots=True)
class ViewRequest:
    """One request as the viewer sees it: header names lowercased, the path under the
    viewer's prefix, query values last-wins."""

    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    @classmethod
    def parse(
        cls, method: str, target: str, headers: Mapping[str, str], body: bytes = b""
    ) -> ViewRequest:
        parts = urlsplit(target)
        query = dict(parse_qsl(parts.query, keep_blank_values=False))
        return cls(method.upper(), parts.path or "/", query, headers, body)


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = HTML
    headers: tuple[tuple[str, str], ...] = field(default=())

    def all_headers(self) -> list[tuple[str, str]]:
        """Content type, the security headers, then the reply's own."""
        return [("content-type", self.content_type), *SECURITY_HEADERS, *self.headers]


REASONS = MappingProxyType(
    {
        200: "OK",
        303: "See Other",
        400: "Bad Request",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not Found",
        405: "Method Not Allowed",
        409: "Conflict",
        413: "Content Too Large",
        500: "Internal Server Error",
        503: "Service Unavailable",
    }
)
