"""`curator audit serve`: its arguments, the admin keys read from the config's `auth:`
section alone, which hosts count as loopback, and `serve` itself (the printed URL, a port
that is taken, an interrupt)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import io
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from policies.errors import ConfigError
from proxy.cli import audit_serve
from proxy.viewer.app import Viewer
from tests.proxy.viewer.records import entries, write


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--path")
    top = argparse.ArgumentParser()
    commands = top.add_subparsers(dest="command")
    audit_serve.add_parser(commands, common)
    return top


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


# add_parser


def test_serve_defaults_to_loopback_on_its_own_port() -> None:
    args = parser().parse_args(["serve"])
    assert (args.host, args.port, args.path) == ("127.0.0.1", audit_serve.DEFAULT_PORT, None)


def test_serve_takes_a_host_a_port_and_the_common_options() -> None:
    args = parser().parse_args(["serve", "--host", "::1", "--port", "0", "--path", "a.db"])
    assert (args.host, args.port, args.path) == ("::1", 0, "a.db")


def test_a_port_that_is_not_a_number_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["serve", "--port", "http"])
    assert "--port: invalid int value: 'http'" in capsys.readouterr().err


# admin_keys


def test_no_config_means_no_keys() -> None:
    assert audit_serve.admin_keys(None) == ()


@pytest.mark.parametrize(
    "text",
    ["", "upstreams: {}\n", "auth: null\n", "auth: {keys: [client-key]}\n", "- a list\n"],
)
def test_a_config_without_admin_keys_gives_none(tmp_path: Path, text: str) -> None:
    assert audit_serve.admin_keys(config(tmp_path, text)) == ()


def test_admin_keys_are_read_with_env_substitution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIEWER_KEY", "from-env")
    path = config(tmp_path, 'auth:\n  admin_keys: [first, "${VIEWER_KEY}"]\n')
    assert audit_serve.admin_keys(path) == ("first", "from-env")


@pytest.mark.parametrize(
    "elsewhere",
    [
        "routes: ${UNSET_FOR_AUDIT_SERVE}\n",  # an unset variable outside auth
        "x: !!int nope\n",  # a value that fails its tag
        "a: 1\na: 2\n",  # a duplicate key
        "authx: 1\n",  # a key that only starts like auth
    ],
)
def test_a_problem_elsewhere_in_the_config_does_not_keep_the_viewer_closed(
    tmp_path: Path, elsewhere: str
) -> None:
    path = config(tmp_path, elsewhere + "auth: {admin_keys: [k1]}\n")
    assert audit_serve.admin_keys(path) == ("k1",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('auth:\n  admin_keys: ["${UNSET_FOR_AUDIT_SERVE}"]\n',
         r"config\.yaml:2: auth\.admin_keys\[0\]: environment variable 'UNSET_FOR_AUDIT_SERVE'"),
        ("auth: {admin_keys: [k, k]}\n", r"auth\.admin_keys\[1\]: duplicate key"),
        ("auth: {admin_keys: k}\n", r"auth\.admin_keys: expected a list of keys"),
        ("auth: {admin_keys: ['has space']}\n", r"auth\.admin_keys\[0\]: expected printable"),
        ("auth: {admin: [k]}\n", r"auth\.admin: unknown key 'admin'; did you mean 'admin_keys'"),
        ("auth: 5\n", r"auth: expected a mapping"),
        ("auth: {admin_keys: [a]}\nauth: {admin_keys: [b]}\n", r"auth: duplicate key 'auth'"),
    ],
)  # fmt: skip
def test_a_problem_in_auth_is_a_config_error_naming_where(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        audit_serve.admin_keys(config(tmp_path, text))


def test_a_config_that_cannot_be_read_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        audit_serve.admin_keys(str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match="invalid YAML"):
        audit_serve.admin_keys(config(tmp_path, "auth: {admin_keys: [a\n"))


# loopback


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.com", False),
        ("LOCALHOST", False),  # only the exact name: anything unsure needs keys
        ("", False),
    ],
)
def test_loopback(host: str, expected: bool) -> None:
    assert audit_serve.loopback(host) is expected


# serve


def fake_listener(sockname: tuple[Any, ...], seen: dict[str, Any]) -> Callable[..., Any]:
    @asynccontextmanager
    async def listener(
        host: str, port: int, path: str, render: object, *, viewer: Viewer
    ) -> AsyncIterator[SimpleNamespace]:
        seen.update(host=host, port=port, path=path, render=render, viewer=viewer)
        yield SimpleNamespace(sockets=[SimpleNamespace(getsockname=lambda: sockname)])

    return listener


def interrupt_on_wait(monkeypatch: pytest.MonkeyPatch, before: Any = None) -> None:
    """Ctrl-C while serving: the wait for ever raises KeyboardInterrupt (after `before`)."""

    class Interrupted:
        async def wait(self) -> None:
            if before is not None:
                await before()
            raise KeyboardInterrupt

    monkeypatch.setattr(audit_serve, "asyncio", SimpleNamespace(run=asyncio.run, Event=Interrupted))


def test_serve_prints_the_url_and_stops_cleanly_on_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(audit_serve, "admin_listener", fake_listener(("127.0.0.1", 4321), seen))
    interrupt_on_wait(monkeypatch)
    db, _ = write(tmp_path, entries())
    assert audit_serve.serve((str(db), None, {}), "127.0.0.1", 0, ()) == 0
    assert capsys.readouterr().out == f"audit viewer for {db}: http://127.0.0.1:4321/requests\n"
    assert (seen["host"], seen["port"], seen["path"], seen["render"]) == ("127.0.0.1", 0, "", None)
    viewer = seen["viewer"]
    assert not viewer.keys
    reader = viewer.open_reader()  # the viewer reads the store it was given
    try:
        assert reader.get("a2") is not None
    finally:
        reader.close()


def test_serve_brackets_ipv6_masks_the_store_and_says_a_key_is_needed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(audit_serve, "admin_listener", fake_listener(("::1", 9465, 0, 0), seen))
    interrupt_on_wait(monkeypatch)
    store = ("postgresql://curator:hunter2@db/audit", "postgres", {})
    assert audit_serve.serve(store, "::1", 9465, ("k1", "k2")) == 0
    out = capsys.readouterr().out
    assert out == (
        "audit viewer for postgresql://***@db/audit: http://[::1]:9465/requests"
        " (admin key needed)\n"
    )
    assert seen["viewer"].keys.accepts("k2")


@pytest.mark.parametrize(
    ("error", "shown"),
    [(OSError(98, "Address already in use"), "Address already in use"), (OSError("boom"), "boom")],
)
def test_a_listen_failure_is_one_line_and_status_1(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: OSError,
    shown: str,
) -> None:
    @asynccontextmanager
    async def failing(*_args: Any, **_kwargs: Any) -> AsyncIterator[None]:
        raise error
        yield  # pragma: no cover

    monkeypatch.setattr(audit_serve, "admin_listener", failing)
    assert audit_serve.serve(("a.db", None, {}), "10.1.2.3", 80, ()) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"curator audit: cannot listen on 10.1.2.3:80: {shown}\n"


def test_a_port_already_taken_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert audit_serve.serve((str(tmp_path / "a.db"), None, {}), "127.0.0.1", port, ()) == 1
    # Said once and in this command's terms (it read "metrics.port N: cannot listen on ...").
    reason = os.strerror(errno.EADDRINUSE)
    assert capsys.readouterr().err == (
        f"curator audit: cannot listen on 127.0.0.1:{port}: {reason}\n"
    )


def test_the_printed_url_serves_the_viewer_over_a_real_socket(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db, _ = write(tmp_path, entries())
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    answers: list[httpx.Response] = []

    async def browse() -> None:
        url = out.getvalue().split(": ", 1)[1].split()[0]
        async with httpx.AsyncClient(timeout=10) as client:
            answers.append(await client.get(url))
            answers.append(await client.get(url, headers={"authorization": "Bearer k1"}))

    interrupt_on_wait(monkeypatch, before=browse)
    assert audit_serve.serve((str(db), None, {}), "127.0.0.1", 0, ("k1",)) == 0
    denied, listed = answers
    assert denied.status_code == 401
    assert listed.status_code == 200
    assert 'data-id="a200000000"' in listed.text
    assert out.getvalue().endswith("/requests (admin key needed)\n")
