"""The `auth:` section and the `server:` limits: parsed at load, errors with key paths that
never quote a key, and `curator serve` refusing to expose an upstream key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from policies.errors import ConfigError
from proxy.cli.main import main
from proxy.config.auth import AuthConfig
from proxy.config.limits import HARD_MAX_BODY_MB, MIB, Limits
from proxy.config.loader import Config, load_config
from proxy.serving import app as proxy_app
from proxy.serving.guard import bind_refusal, is_loopback
from tests.hardening.support import hardening_config

SECRET = "ck-very-secret-proxy-key-123"
BASE = """\
upstreams:
  openai: {base_url: "https://api.openai.com/v1", api_key: "${UPSTREAM_KEY:-}"}
policies:
  off: preset:passthrough
routes:
  - {name: default, upstream: openai, policy: "off"}
"""


def _write(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(BASE + textwrap.dedent(extra))
    return path


def _load(tmp_path: Path, extra: str, env: dict[str, str] | None = None) -> Config:
    return load_config(_write(tmp_path, extra), environ=env or {})


def _problems(tmp_path: Path, extra: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, extra, env)
    return [str(p).removeprefix(f"{tmp_path}/") for p in info.value.problems]


def test_defaults_without_the_sections(tmp_path: Path) -> None:
    config = _load(tmp_path, "")
    assert config.auth == AuthConfig()
    assert config.server.limits == Limits()
    assert config.server.limits.max_body_bytes == 32 * MIB


def test_keys_and_limits_resolve_from_the_environment(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        """\
        auth: {keys: ["${CURATOR_KEY}", literal-key-2], allow_unauthenticated: false}
        server:
          host: 0.0.0.0
          max_body_mb: 8
          max_inflight: 64
          max_messages: 500
          max_json_depth: 32
          shutdown_grace_s: 12.5
        """,
        {"CURATOR_KEY": SECRET},
    )
    assert config.auth.keys == (SECRET, "literal-key-2")
    assert config.auth.enabled
    assert config.server.limits == Limits(8, 64, 500, 32, 12.5)
    assert config.server.host == "0.0.0.0"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            'auth: {keys: ["${CURATOR_KEY:-}"]}',
            "config.yaml:7: auth.keys[0]: expected a non-empty key "
            "(is its ${VARIABLE} set?), got an empty string",
        ),
        (
            "auth: {keys: ''}",
            "config.yaml:7: auth.keys: expected a list of keys, got a string",
        ),
        (
            f"auth: {{keys: [{SECRET}, {SECRET}]}}",
            "config.yaml:7: auth.keys[1]: duplicate key (also keys[0])",
        ),
        (
            f'auth: {{keys: ["{SECRET} with spaces"]}}',
            "config.yaml:7: auth.keys[0]: expected printable ASCII without spaces "
            "(it is sent as a Bearer token)",
        ),
        (
            "auth: {key: [a]}",
            "config.yaml:7: auth.key: unknown key 'key'; did you mean 'keys'?",
        ),
        (
            "auth: {allow_unauthenticated: yes-please}",
            "config.yaml:7: auth.allow_unauthenticated: expected true or false, "
            "got a string 'yes-please'",
        ),
        (
            "server: {max_body_mb: 65}",
            "config.yaml:7: server.max_body_mb: expected an integer from 1 to 64, "
            "got an integer 65",
        ),
        (
            "server: {max_inflight: 0}",
            "config.yaml:7: server.max_inflight: expected an integer from 1 to 1000000, "
            "got an integer 0",
        ),
        (
            "server: {max_json_depth: 1000}",
            "config.yaml:7: server.max_json_depth: expected an integer from 16 to 254, "
            "got an integer 1000",
        ),
        (
            "server: {shutdown_grace_s: -1}",
            "config.yaml:7: server.shutdown_grace_s: expected a number of seconds from 0 to "
            "3600, got an integer -1",
        ),
        (
            "server: {max_body: 10}",
            "config.yaml:7: server.max_body: unknown key 'max_body'; did you mean 'max_body_mb'?",
        ),
    ],
)
def test_problems_name_their_key_path(tmp_path: Path, extra: str, expected: str) -> None:
    assert _problems(tmp_path, extra) == [expected]


def test_unset_key_variable_is_reported_without_any_key(tmp_path: Path) -> None:
    found = _problems(tmp_path, 'auth: {keys: ["${CURATOR_KEY}"]}')
    assert len(found) == 1
    assert found[0].startswith("config.yaml:7: auth.keys[0]: environment variable 'CURATOR_KEY'")


def test_problems_never_quote_a_key(tmp_path: Path) -> None:
    extra = f'auth: {{keys: ["{SECRET}", "{SECRET}", "{SECRET} x", 7]}}'
    text = "\n".join(_problems(tmp_path, extra))
    assert SECRET not in text
    assert "auth.keys[3]: expected a non-empty key (is its ${VARIABLE} set?), got an integer" in (
        text
    )


def test_the_body_limit_cannot_exceed_the_apps_own_cap() -> None:
    assert HARD_MAX_BODY_MB * MIB == proxy_app.MAX_BODY_BYTES


# -- exposure ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("proxy.internal", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("host", "api_key", "auth", "refused"),
    [
        ("0.0.0.0", "sk-up", AuthConfig(), True),
        ("0.0.0.0", "sk-up", AuthConfig(keys=("k",)), False),
        ("0.0.0.0", "sk-up", AuthConfig(allow_unauthenticated=True), False),
        ("0.0.0.0", None, AuthConfig(), False),  # clients bring their own keys
        ("127.0.0.1", "sk-up", AuthConfig(), False),
    ],
)
def test_bind_refusal(host: str, api_key: str | None, auth: AuthConfig, refused: bool) -> None:
    config = hardening_config("http://127.0.0.1:1", api_key=api_key, auth=auth)
    config = _only_default_route(config)
    reason = bind_refusal(config, host)
    assert (reason is not None) is refused
    if reason is not None:
        assert "sk-up" not in reason
        assert "auth.keys" in reason
        assert "allow_unauthenticated" in reason


def _only_default_route(config: Config) -> Config:
    upstreams = {"fake": config.upstreams["fake"]}
    routes = tuple(r for r in config.routes if r.upstream == "fake")
    return Config(
        config.source, config.server, upstreams, config.policies, routes, auth=config.auth
    )


def test_serve_refuses_a_public_address_with_an_exposed_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "server: {host: 127.0.0.1}\n")
    monkeypatch.setenv("UPSTREAM_KEY", "sk-upstream-never-printed")
    assert main(["serve", "--config", str(path), "--host", "0.0.0.0"]) == 1
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0: upstream 'openai' has an api_key" in err
    assert "sk-upstream-never-printed" not in err


@pytest.mark.parametrize("text", ["\x0c", "routes: []\n\x00", "a: \x1b[31m"])
def test_control_characters_are_a_config_error_not_a_crash(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert [p.message.split(":")[0] for p in info.value.problems] == ["invalid YAML"]
