"""errors.py: `ProxyError`'s OpenAI-shaped body, and the status, code, type, param and fixed
message of every error the proxy answers itself."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from proxy import errors
from proxy.errors import JSON_HEADERS, ProxyError
from proxy.serving.paths import REASONS


def test_defaults_make_an_invalid_request_error_without_param_or_headers() -> None:
    err = ProxyError(400, "bad", "Bad request.")
    assert (err.status, err.code, err.message, err.type, err.param, err.headers) == (
        400,
        "bad",
        "Bad request.",
        "invalid_request_error",
        None,
        (),
    )


def test_it_is_an_exception_whose_text_is_the_message() -> None:
    err = ProxyError(418, "teapot", "I am a teapot.", type_="x", param="p")
    assert isinstance(err, Exception)
    assert str(err) == "I am a teapot."
    assert err.args == ("I am a teapot.",)
    with pytest.raises(ProxyError, match=r"^I am a teapot\.$"):
        raise err


def test_payload_is_openais_error_shape() -> None:
    err = ProxyError(400, "c", "m", type_="t", param="p")
    assert err.payload() == {"error": {"message": "m", "type": "t", "param": "p", "code": "c"}}


def test_body_is_the_payload_as_compact_json_in_field_order() -> None:
    assert ProxyError(400, "c", "m", type_="t", param="p").body() == (
        b'{"error":{"message":"m","type":"t","param":"p","code":"c"}}'
    )
    assert ProxyError(404, "c", "m").body() == (
        b'{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"c"}}'
    )


def test_body_escapes_what_the_message_holds() -> None:
    message = 'A "quoted" \\ back\nslash, caf\u00e9 \u2028 \x00'
    err = ProxyError(400, "c", message)
    assert orjson.loads(err.body()) == err.payload()
    assert orjson.loads(err.body())["error"]["message"] == message


def test_json_headers_say_the_body_is_json() -> None:
    assert JSON_HEADERS == ((b"content-type", b"application/json"),)


Factory = Callable[[], ProxyError]


@pytest.mark.parametrize(
    ("make", "status", "code", "type_", "param", "message"),
    [
        (
            errors.upstream_unreachable,
            502,
            "upstream_unreachable",
            "upstream_error",
            None,
            "The proxy could not connect to the upstream API server.",
        ),
        (
            errors.upstream_timeout,
            504,
            "upstream_timeout",
            "upstream_error",
            None,
            "The upstream API server did not respond in time.",
        ),
        (
            errors.upstream_failed,
            502,
            "upstream_error",
            "upstream_error",
            None,
            "The connection to the upstream API server failed before a response arrived.",
        ),
        (
            lambda: errors.request_too_large(1_048_576),
            413,
            "request_too_large",
            "invalid_request_error",
            None,
            "The request body exceeds the proxy's limit of 1048576 bytes.",
        ),
        (
            errors.no_route,
            404,
            "no_route",
            "invalid_request_error",
            None,
            "No route of the proxy's configuration matches this request.",
        ),
        (
            lambda: errors.context_length_exceeded("Too long: 130000 > 128000 tokens."),
            400,
            "context_length_exceeded",
            "invalid_request_error",
            "messages",
            "Too long: 130000 > 128000 tokens.",
        ),
        (
            lambda: errors.invalid_path(REASONS["dot"]),
            400,
            "invalid_path",
            "invalid_request_error",
            None,
            "The request path has a segment of dots only ('.', '..', ...). The proxy forwards "
            "only paths in normal form, so that the upstream sees the path that was routed and "
            "curated.",
        ),
        (
            lambda: errors.unknown_path(()),
            404,
            "unknown_path",
            "invalid_request_error",
            None,
            "Unknown path. This proxy serves the OpenAI API under /v1/* (a client's base URL "
            "must end in /v1).",
        ),
        (
            lambda: errors.unknown_path(("/healthz", "/metrics")),
            404,
            "unknown_path",
            "invalid_request_error",
            None,
            "Unknown path. This proxy serves the OpenAI API under /v1/* (a client's base URL "
            "must end in /v1); also /healthz, /metrics.",
        ),
    ],
)
def test_each_error_has_its_status_code_type_and_fixed_message(
    make: Factory, status: int, code: str, type_: str, param: str | None, message: str
) -> None:
    err = make()
    assert (err.status, err.code, err.type, err.param, err.message) == (
        status,
        code,
        type_,
        param,
        message,
    )
    assert err.headers == ()
    assert orjson.loads(err.body()) == {
        "error": {"message": message, "type": type_, "param": param, "code": code}
    }


@pytest.mark.parametrize(
    ("allowed", "listed"),
    [(("GET",), b"GET"), (("GET", "HEAD", "POST"), b"GET, HEAD, POST")],
)
def test_method_not_allowed_lists_the_methods_in_allow(
    allowed: tuple[str, ...], listed: bytes
) -> None:
    err = errors.method_not_allowed(allowed)
    assert (err.status, err.code, err.type, err.param) == (
        405,
        "method_not_allowed",
        "invalid_request_error",
        None,
    )
    assert err.headers == ((b"allow", listed),)
    assert err.message == (f"Method not allowed. The proxy accepts {listed.decode()} on this path.")


def test_fresh_errors_are_separate_objects() -> None:
    first, second = errors.no_route(), errors.no_route()
    assert first is not second
    first.message = "changed"
    assert second.message == "No route of the proxy's configuration matches this request."
