"""paths.py: which methods and raw paths are fit to forward, and why the others are not.

The real-socket behaviour (nothing refused reaches an upstream; accepted paths arrive byte
for byte) is in tests/hardening/test_paths.py and test_methods.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from proxy.errors import ProxyError
from proxy.serving.paths import ALLOWED_METHODS, checked_target, path_problem


@pytest.mark.parametrize(
    "raw",
    [
        b"/v1/chat/completions",
        b"/v1/models/ft:gpt-4o-mini:org:name:abc123",
        b"/v1/files/file-AbC_1~x/content",
        b"/v1/files/a%20b%C3%A9%3a%3F%23%40",
        b"/v1/.well-known/x",
        b"/v1/a..b/c.",
        b"/v1/!$&'()*+,=:@",
    ],
)
def test_paths_in_normal_form_are_accepted(raw: bytes) -> None:
    assert path_problem(raw) is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"/v1//models", "empty"),
        (b"/v1/models/", "empty"),
        (b"/v1/", "empty"),
        (b"/v1/./models", "dot"),
        (b"/v1/x/..", "dot"),
        (b"/v1/x/../models", "dot"),
        (b"/v1/.../models", "dot"),
        (b"/v1/%2e%2e/models", "escape"),
        (b"/v1/%2E/models", "escape"),
        (b"/v1/a%2fb", "escape"),
        (b"/v1/a%2Fb", "escape"),
        (b"/v1/a%5cb", "escape"),
        (b"/v1/a%25b", "escape"),
        (b"/v1/a%3Bb", "escape"),
        (b"/v1/%6dodels", "escape"),
        (b"/v1/a%7E", "escape"),
        (b"/v1/a%0a", "escape"),
        (b"/v1/a%7f", "escape"),
        (b"/v1/%C0%AE%C0%AE/x", "utf8"),
        (b"/v1/caf%E9", "utf8"),
        (b"/v1/%EF%BC%8E%EF%BC%8E/x", "lookalike"),
        (b"/v1/a%EF%BC%8Fb", "lookalike"),
        (b"/v1/a%EF%BC%BCb", "lookalike"),
        (b"/v1/%E2%80%A5", "lookalike"),
        (b"/v1/a%", "malformed"),
        (b"/v1/a%4", "malformed"),
        (b"/v1/a%zz", "malformed"),
        (b"/v1/a\\b", "char"),
        (b"/v1/a;b", "char"),
        (b"/v1/a|b", "char"),
        (b'/v1/a"b', "char"),
        (b"/v1/a b", "char"),
        (b"/v1/caf\xc3\xa9", "char"),
        (b"v1/models", "char"),
        (b"", "char"),
    ],
)
def test_paths_not_in_normal_form_are_refused_with_their_reason(raw: bytes, reason: str) -> None:
    assert path_problem(raw) == reason


def test_a_long_hostile_path_is_judged_in_linear_time() -> None:
    # Nested quantifiers over client input could backtrack exponentially; these finish.
    assert path_problem(b"/v1/" + b"a" * 200_000 + b"|") == "char"
    assert path_problem(b"/v1" + b"/a%20" * 50_000 + b"/") == "empty"
    assert path_problem(b"/v1/" + b"." * 100_000) == "dot"
    assert path_problem(b"/v1/" + b"." * 100_000 + b"a") is None


def scope(method: str = "GET", path: str = "/v1/models", **extra: Any) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, **extra}


def test_the_checked_target_is_the_raw_path() -> None:
    raw = b"/v1/files/a%20b"
    assert checked_target(scope(path="/v1/files/a b", raw_path=raw)) == raw


def test_without_a_raw_path_the_decoded_one_is_re_encoded_and_checked() -> None:
    assert checked_target(scope(path="/v1/files/a b")) == b"/v1/files/a%20b"
    for decoded in ("/v1/a/../b", "/v1/a%2Fb", "/v1/a\\b", "/v1/a;b"):
        with pytest.raises(ProxyError) as refused:
            checked_target(scope(path=decoded))
        assert (refused.value.status, refused.value.code) == (400, "invalid_path")


def test_a_raw_path_that_only_decodes_into_v1_is_refused() -> None:
    with pytest.raises(ProxyError) as refused:
        checked_target(scope(path="/v1/../x", raw_path=b"/v1%2F..%2Fx"))
    assert refused.value.code == "invalid_path"


@pytest.mark.parametrize("method", ["TRACE", "CONNECT", "PROPFIND", "get", "X"])
def test_other_methods_are_a_405_with_allow(method: str) -> None:
    with pytest.raises(ProxyError) as refused:
        checked_target(scope(method=method))
    err = refused.value
    assert (err.status, err.code) == (405, "method_not_allowed")
    assert err.headers == ((b"allow", ", ".join(ALLOWED_METHODS).encode()),)


def test_the_method_is_checked_before_the_path() -> None:
    with pytest.raises(ProxyError) as refused:
        checked_target(scope(method="TRACE", path="/v1/../x"))
    assert refused.value.status == 405
