"""A port `curator serve` cannot bind, on a real `curator serve`: the client port or the admin
listener's (`metrics.port`) taken is one line naming the setting and the port, nothing said
of listening, and exit 1, with one worker and with two; a worker that fails to start makes
the parent exit 3 (uvicorn's status), with two workers as with one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

RUN_S = 90.0
"""Bound for the process to fail and exit (tokenizers load first); not a speed check."""


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port some other program listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(tmp_path: Path, *, port: int, metrics_port: int, workers: int) -> tuple[int, str]:
    config = tmp_path / "config.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            upstreams: {{u: {{base_url: "http://127.0.0.1:9/v1", discover_models: false}}}}
            policies: {{p: preset:passthrough}}
            routes: [{{name: r, upstream: u, policy: p}}]
            metrics: {{port: {metrics_port}}}
            """
        )
    )
    command = [sys.executable, "-m", "proxy.cli.main", "serve", "--config", str(config)]
    done = subprocess.run(
        [*command, "--port", str(port), "--workers", str(workers)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=RUN_S,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_a_metrics_port_in_use_is_one_line_and_exit_1(
    tmp_path: Path, taken: int, workers: int
) -> None:
    status, output = serve(tmp_path, port=free_port(), metrics_port=taken, workers=workers)
    assert status == 1, output
    expected = f"metrics.port {taken}: cannot listen on 127.0.0.1: Address already in use"
    assert output.splitlines() == [f"ERROR:     {expected}"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_client_port_in_use_is_one_line_and_exit_1(
    tmp_path: Path, taken: int, workers: int
) -> None:
    status, output = serve(tmp_path, port=taken, metrics_port=free_port(), workers=workers)
    assert status == 1, output
    expected = f"ERROR:     cannot listen on 127.0.0.1:{taken}: Address already in use"
    assert output.splitlines() == [expected]


def test_a_worker_failing_to_start_makes_the_parent_exit_3(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """\
        import logging, socket, sys
        import uvicorn
        from proxy.serving.reload import serve_workers
        logging.basicConfig(level=logging.INFO)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config("no_such_module:app", workers=2, log_config=None)
        serve_workers(config, sock)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_S,
    )
    assert done.returncode == 3, done.stderr
    assert "failed to start" in done.stderr
