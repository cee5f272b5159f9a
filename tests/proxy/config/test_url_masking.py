"""Credentials in configured URLs (`https://user:key@host`, `redis://:password@host`,
`?key=`) never reach `curator check`'s output, config errors or log lines."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from proxy.cli.main import main

USER_KEY = "sk-proj-" + "UserInfo9_" * 3
REDIS_PASSWORD = "r3dis-" + "Pa55word-" * 2
QUERY_KEY = "QueryKey-" + "7f1e" * 4
SECRETS = (USER_KEY, USER_KEY[8:20], REDIS_PASSWORD, QUERY_KEY)

CONFIG = f"""\
upstreams:
  gateway: {{base_url: "https://team:{USER_KEY}@gateway.internal:8443/v1"}}
  token: {{base_url: "https://{USER_KEY}@llm.internal/v1"}}
policies:
  agents:
    curators:
      - summarizer:
          upstream: gateway
          model: gpt-4o-mini
          trigger_tokens: 800
          cache: "redis://:{REDIS_PASSWORD}@cache.internal:6379/0"
routes:
  - {{name: token, upstream: token, policy: agents, match: {{model: "x*"}}}}
  - {{name: default, upstream: gateway, policy: agents}}
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OPENAI_API_KEY", "CURATOR_UPSTREAM", "CURATOR_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./curator.yaml: built-in defaults


def _assert_masked(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def test_check_masks_user_info_and_redis_passwords(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    assert main(["check", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    _assert_masked(out + err)
    # Credentials leave the URL as the config is read: they are the upstream's Authorization.
    basic = "(Basic credentials from the URL)"
    assert f"upstream: gateway https://gateway.internal:8443/v1 {basic}" in out
    assert f"upstream: token https://llm.internal/v1 {basic}" in out
    assert "cache: 'redis://***@cache.internal:6379/0'" in out


@pytest.mark.parametrize(
    "base_url",
    [
        f"ftp://team:{USER_KEY}@gateway.internal/v1",
        f"https://team:{USER_KEY}@gateway.internal/v1?key={QUERY_KEY}",
        f"https://gateway.internal/v1?api-key={QUERY_KEY}",
        f"https://team:{USER_KEY}@gateway.internal:bad/v1",
    ],
)
def test_config_errors_mask_the_url(
    base_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.replace(f"https://team:{USER_KEY}@gateway.internal:8443/v1", base_url))
    assert main(["check", "--config", str(path)]) == 1
    _, err = capsys.readouterr()
    assert "upstreams.gateway.base_url" in err
    _assert_masked(err)


def test_the_built_in_upstream_is_logged_masked(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("CURATOR_UPSTREAM", f"https://team:{USER_KEY}@gateway.internal/v1")
    assert main(["check"]) == 0
    out, err = capsys.readouterr()
    _assert_masked(out + err + caplog.text)
    assert "upstream https://gateway.internal/v1," in caplog.text
    monkeypatch.setenv("CURATOR_UPSTREAM", f"ftp://team:{USER_KEY}@gateway.internal/v1")
    assert main(["check"]) == 1
    out, err = capsys.readouterr()
    assert "$CURATOR_UPSTREAM" in err
    _assert_masked(out + err + caplog.text)
