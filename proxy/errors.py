"""Errors the proxy answers itself, in OpenAI's shape `{"error": {message, type, param, code}}`.

Messages are fixed texts written for the client: they never carry upstream URLs, host
names, keys or tracebacks, because a proxy error body is visible to whoever sent the
request. Details go to the log instead.
"""

from __future__ import annotations

import orjson

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
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.type = type_
        self.param = param

    def payload(self) -> dict[str, dict[str, str | None]]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def body(self) -> bytes:
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


def context_length_exceeded(message: str) -> ProxyError:
    return ProxyError(400, "context_length_exceeded", message, param="messages")
