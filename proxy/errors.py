"""Errors the proxy answers itself, in OpenAI's shape `{"error": {message, type, param, code}}`,
or, for a request to Anthropic's API, in Anthropic's `{"type": "error", "error": {type, message}}`
(`ProxyError.body(style)`; the exchange knows its request's vendor, the error does not).

Messages are fixed texts written for the client: they never carry upstream URLs, host
names, keys or tracebacks, because a proxy error body is visible to whoever sent the
request. Details go to the log instead.
"""

from __future__ import annotations

from typing import Literal

import orjson

ErrorStyle = Literal["openai", "anthropic"]
"""Whose error shape a proxy error takes: the API the client was speaking."""
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}
"""Anthropic's error `type` for each status (any other: `api_error`), as its API documents."""
JSON_HEADERS: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),)


class ProxyError(Exception):
    """An error the proxy answers with its own OpenAI-shaped body."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        type_: str = "invalid_request_error",
        param: str | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.type = type_
        self.param = param
        self.headers = headers
        """Extra response headers the status calls for (405's Allow)."""

    def payload(self) -> dict[str, dict[str, str | None]]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def anthropic_payload(self) -> dict[str, object]:
        kind = ANTHROPIC_TYPES.get(self.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": self.message}}

    def body(self, style: ErrorStyle = "openai") -> bytes:
        if style == "anthropic":
            return orjson.dumps(self.anthropic_payload())
        return orjson.dumps(self.payload())


def upstream_unreachable() -> ProxyError:
    return ProxyError(
        502,
        "upstream_unreachable",
        "The proxy could not connect to the upstream API server.",
        type_="upstream_error",
    )


def upstream_timeout() -> ProxyError:
    return ProxyError(
        504,
        "upstream_timeout",
        "The upstream API server did not respond in time.",
        type_="upstream_error",
    )


def upstream_failed() -> ProxyError:
    return ProxyError(
        502,
        "upstream_error",
        "The connection to the upstream API server failed before a response arrived.",
        type_="upstream_error",
    )


def request_too_large(limit: int) -> ProxyError:
    return ProxyError(
        413,
        "request_too_large",
        f"The request body exceeds the proxy's limit of {limit} bytes.",
    )


def no_route() -> ProxyError:
    return ProxyError(
        404,
        "no_route",
        "No route of the proxy's configuration matches this request.",
    )


def no_anthropic_upstream() -> ProxyError:
    return ProxyError(
        404,
        "no_anthropic_upstream",
        "This proxy has no Anthropic upstream: a request for Anthropic's API is never sent "
        "to another vendor's upstream. Configure an upstream with kind: anthropic and a "
        "route to it.",
    )


def context_length_exceeded(message: str) -> ProxyError:
    return ProxyError(400, "context_length_exceeded", message, param="messages")


def invalid_path(reason: str) -> ProxyError:
    """`reason` is one of `proxy.serving.paths.REASONS`: fixed texts, never the client's path."""
    return ProxyError(
        400,
        "invalid_path",
        f"The request path {reason}. The proxy forwards only paths in normal form, "
        "so that the upstream sees the path that was routed and curated.",
    )


def method_not_allowed(allowed: tuple[str, ...]) -> ProxyError:
    listed = ", ".join(allowed)
    return ProxyError(
        405,
        "method_not_allowed",
        f"Method not allowed. The proxy accepts {listed} on this path.",
        headers=((b"allow", listed.encode("ascii")),),
    )


def unknown_path(served: tuple[str, ...]) -> ProxyError:
    """`served`: the paths this listener answers besides `/v1/*` (e.g. /healthz)."""
    others = f"; also {', '.join(served)}" if served else ""
    return ProxyError(
        404,
        "unknown_path",
        "Unknown path. This proxy serves the OpenAI API under /v1/* (a client's base URL "
        f"must end in /v1){others}.",
    )
