"""The connection-limit keys of `server:`: parsed at load, errors as `file:line: key.path`,
and `max_connections` sized from the open-file limit when unset."""

from __future__ import annotations

import resource
import textwrap
from pathlib import Path

import pytest

from policies.errors import ConfigError
from proxy.config.limits import Limits
from proxy.config.loader import Config, load_config
from proxy.serving.conn_limits import (
    FDS_PER_CONNECTION,
    RESERVED_FDS,
    ConnLimits,
    closing_response,
    conn_limits,
    connection_limit,
    request_header_too_large,
    too_many_connections,
)

BASE = """\
upstreams:
  openai: {base_url: "https://api.openai.com/v1"}
policies:
  off: preset:passthrough
routes:
  - {name: default, upstream: openai, policy: "off"}
"""


def _load(tmp_path: Path, server: str) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(BASE + textwrap.dedent(server))
    return load_config(path)


def test_the_keys_are_read(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        """\
        server:
          max_header_kb: 16
          header_timeout_s: 2.5
          body_timeout_s: 60
          max_connections: 5000
        """,
    )
    limits = config.server.limits
    assert (limits.max_header_kb, limits.header_timeout_s, limits.body_timeout_s) == (16, 2.5, 60)
    assert limits.max_connections == 5000
    assert conn_limits(limits) == ConnLimits(16 * 1024, 2.5, 60.0, 5000)


def test_defaults_and_null_max_connections(tmp_path: Path) -> None:
    limits = _load(tmp_path, "server: {max_connections: null}").server.limits
    assert limits == Limits()
    assert (limits.max_header_kb, limits.header_timeout_s, limits.body_timeout_s) == (64, 10, 30)
    assert conn_limits(limits).max_connections == connection_limit()


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        (
            "server: {max_header_kb: 0}",
            "config.yaml:7: server.max_header_kb: expected an integer from 1 to 1024, "
            "got an integer 0",
        ),
        (
            "server: {header_timeout_s: 0}",
            "config.yaml:7: server.header_timeout_s: expected a number of seconds above 0, "
            "at most 3600, got an integer 0",
        ),
        (
            "server: {body_timeout_s: forever}",
            "config.yaml:7: server.body_timeout_s: expected a number of seconds above 0, "
            "at most 3600, got a string 'forever'",
        ),
        (
            "server: {max_connections: 0}",
            "config.yaml:7: server.max_connections: expected an integer from 1 to 1000000, "
            "or null (from the fd limit), got an integer 0",
        ),
    ],
)
def test_problems_name_their_key_path(tmp_path: Path, server: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, server)
    assert [str(p).removeprefix(f"{tmp_path}/") for p in info.value.problems] == [expected]


def test_max_connections_leaves_descriptors_for_upstreams_and_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    assert connection_limit() == (1024 - RESERVED_FDS) // FDS_PER_CONNECTION == 448
    monkeypatch.setattr(resource, "getrlimit", lambda _: (100, 4096))
    assert connection_limit() == 1
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY,) * 2)
    assert connection_limit() == 10**6


def test_the_raw_answers_are_complete_http_responses() -> None:
    raw = closing_response(request_header_too_large(65536))
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert b"connection: close" in lines
    assert f"content-length: {len(body)}".encode() in lines
    assert b'"code":"request_header_too_large"' in body
    assert b"retry-after: 1" in closing_response(too_many_connections()).split(b"\r\n")
