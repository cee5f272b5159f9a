"""Config errors name the variable or the file a value came from, never the value: a key in
`${OPENAI_API_KEY}` put where a URL or a number belongs, or a secret file named as a policy
(or as the config), must not reach `curator check`, `serve`'s exit or a reload's log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from proxy.cli.main import main
from tests.proxy.config.configs import problems, write

KEY = "sk-proj-" + "EnvSecret7_" * 3
FILE_SECRET = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + "Zm9v" * 8
ENV = {"OPENAI_API_KEY": KEY, "PORT": "70000"}


def _clean(lines: list[str]) -> str:
    text = "\n".join(lines)
    for secret in (KEY, KEY[8:20], FILE_SECRET[:20], "b3BlbnNz"):
        assert secret not in text
    return text


def test_substituted_values_are_named_by_their_variable(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        server:
          port: ${PORT}
        upstreams:
          u: {base_url: "${OPENAI_API_KEY}", connect_timeout_s: "${OPENAI_API_KEY}"}
        policies:
          p: "${OPENAI_API_KEY}"
        routes:
          - {name: d, upstream: u, policy: "x-${OPENAI_API_KEY}"}
        """,
        ENV,
    )
    assert len(found) == 5, found
    _clean(found)
    assert found[0] == (
        "config.yaml:2: server.port: expected an integer from 1 to 65535, "
        "got an integer from ${PORT} (not shown)"
    )
    got = "got a string from ${OPENAI_API_KEY} (not shown)"
    assert {line.split(": expected")[0] for line in found[1:3] if line.endswith(got)} == {
        "config.yaml:4: upstreams.u.base_url",
        "config.yaml:4: upstreams.u.connect_timeout_s",
    }
    assert found[3].startswith("config.yaml:6: policies.p: policy file not found: ")
    assert found[3].endswith("/${OPENAI_API_KEY} (not shown)")
    assert found[4].startswith("config.yaml:8: routes[0].policy: unknown policy ${OPENAI_API_KEY}")


def test_a_secret_file_named_as_a_policy_is_named_not_shown(tmp_path: Path) -> None:
    (tmp_path / "id_ed25519").write_text(FILE_SECRET)
    found = problems(
        tmp_path,
        """\
        upstreams: {u: {base_url: "https://x/v1"}}
        policies: {p: id_ed25519}
        routes: [{name: d, upstream: u, policy: p}]
        """,
    )
    assert _clean(found) == (
        "id_ed25519:1: expected a policy mapping, got a string from the file's text (not shown)"
    )


def test_check_and_serve_quote_no_secret(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (tmp_path / "secret.env").write_text(f"OPENAI_API_KEY={KEY}\n")
    config = write(tmp_path, 'upstreams: {u: {base_url: "${OPENAI_API_KEY}"}}\n')
    for argv in (
        ["check", "--config", str(config)],
        ["serve", "--config", str(config)],
        ["check", "--config", str(tmp_path / "secret.env")],
    ):
        assert main(argv) != 0
    monkeypatch.setenv("CURATOR_UPSTREAM", KEY)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")  # no ./config.yaml: built-in defaults
    assert main(["check"]) == 1
    out, err = capsys.readouterr()
    text = _clean([out, err, caplog.text])
    assert "${OPENAI_API_KEY} (not shown)" in text
    assert "secret.env:1: expected a mapping, got a string from the file's text" in text
    assert "$CURATOR_UPSTREAM: expected an http(s) URL" in text
