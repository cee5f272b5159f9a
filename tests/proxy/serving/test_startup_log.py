"""The startup log says where the audit viewer is, or that it is served nowhere."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from proxy.config.audit import AuditConfig
from proxy.config.auth import AuthConfig
from proxy.config.loader import Config, default_config
from proxy.config.metrics import MetricsConfig
from proxy.config.viewer import ViewerConfig
from proxy.observability.observers import viewer_notice

START_S = 60.0
"""Bound for the process to log its startup (tokenizers load first); not a speed check."""


def _config(**changes: object) -> Config:
    return dataclasses.replace(default_config({}), **changes)


PUBLIC = ViewerConfig(public=True)
ADMIN = AuthConfig(admin_keys=("admin-key-1",))


def test_a_public_viewer_is_named_with_its_url() -> None:
    config = _config(viewer=PUBLIC, auth=ADMIN)
    assert viewer_notice(config, "127.0.0.1", 8080) == (
        "audit viewer on http://127.0.0.1:8080/curator/requests"
    )
    assert (
        viewer_notice(config, "::1", 9000) == "audit viewer on http://[::1]:9000/curator/requests"
    )


def test_a_viewer_with_nowhere_to_be_served_says_so() -> None:
    notice = viewer_notice(_config(), "127.0.0.1", 8080)
    assert notice is not None
    assert notice.startswith("audit viewer not served: ")
    assert "metrics.port" in notice


@pytest.mark.parametrize(
    "changes",
    [
        # The admin listener logs the viewer's URL itself, once it is bound.
        {"metrics": MetricsConfig(port=9464)},
        {"viewer": ViewerConfig(enabled=False)},
        {"audit": AuditConfig(sink="none")},
        {"audit": AuditConfig(sink="jsonl", path="-"), "viewer": PUBLIC, "auth": ADMIN},
    ],
    ids=["admin-listener", "disabled", "audit-off", "audit-to-stdout"],
)
def test_nothing_is_said_when_the_viewer_is_off_or_logged_elsewhere(
    changes: dict[str, object],
) -> None:
    assert viewer_notice(_config(**changes), "127.0.0.1", 8080) is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_serve_logs_the_public_viewers_url(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            upstreams: {u: {base_url: "http://127.0.0.1:9/v1", discover_models: false}}
            policies: {p: preset:passthrough}
            routes: [{name: r, upstream: u, policy: p}]
            auth: {admin_keys: [admin-key-1]}
            viewer: {public: true}
            """
        )
    )
    port = _free_port()
    command = [sys.executable, "-m", "proxy.cli.main", "serve", "--config", str(config)]
    lines: list[str] = []
    with subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and proc.poll() is None:
            lines.append(proc.stderr.readline())
            if "Application startup complete" in lines[-1]:
                break
        proc.terminate()
    expected = f"INFO:     audit viewer on http://127.0.0.1:{port}/curator/requests\n"
    assert expected in lines, "".join(lines)
