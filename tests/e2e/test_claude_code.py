"""Claude Code (`claude -p`, npm `@anthropic-ai/claude-code`), unchanged, through a real
`curator serve` whose Anthropic upstream is the strict fake with a scripted model
(`tests.fakes.claude_code_model`: `ls`, then read the note, then answer). Skipped only
when `claude` is not installed (.ci/run installs it)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.claude_code_model import FINAL, ls_then_read
from tests.fakes.servers import ServerThread

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("claude") is None, reason="Claude Code is not installed"),
]

NOTE = "MARKER-4711 the deploy key rotates on Fridays"
QUIET = {
    "DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[FakeAnthropic, str, Path, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text(NOTE + "\n")
    fake = FakeAnthropic(responder=ls_then_read(work, "notes.txt"))
    with ServerThread(fake.app) as upstream:
        port = free_port()
        config = tmp_path / "config.yaml"
        config.write_text(
            f"server: {{host: 127.0.0.1, port: {port}}}\n"
            f"upstreams:\n  claude: {{kind: anthropic, base_url: '{upstream.origin}'}}\n"
            "policies:\n  coding: preset:coding-agent\n"
            "routes:\n  - {name: claude, upstream: claude, policy: coding}\n"
            f"audit: {{sink: sqlite, path: '{tmp_path / 'audit.db'}'}}\n"
        )
        curator = Path(sys.executable).with_name("curator")
        proxy = subprocess.Popen([str(curator), "serve", "--config", str(config)])
        origin = f"http://127.0.0.1:{port}"
        try:
            for _ in range(200):
                try:
                    if httpx.get(origin + "/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            yield fake, origin, work, config
        finally:
            proxy.terminate()
            proxy.wait(10)


def test_claude_code_runs_a_tool_task_through_the_proxy(
    setup: tuple[FakeAnthropic, str, Path, Path], tmp_path: Path
) -> None:
    fake, origin, work, config = setup
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        **QUIET,
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": origin,
        "ANTHROPIC_API_KEY": "sk-ant-dummy",
    }
    prompt = "List the files here, read notes.txt and tell me what it says."
    done = subprocess.run(
        ["claude", "-p", prompt, "--allowedTools", "Bash(ls:*),Read"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert fake.rejected == []
    assert done.returncode == 0, done.stdout + done.stderr
    assert FINAL + NOTE in done.stdout
    # It went through the proxy: curated and audited.
    listing = subprocess.run(
        [str(Path(sys.executable).with_name("curator")), "audit", "list", "--config", str(config)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "anthropic" in listing.stdout
    assert "skipped" not in listing.stdout
