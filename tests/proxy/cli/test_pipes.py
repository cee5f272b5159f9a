"""Every `curator` command that writes to stdout ends like a Unix tool when its reader leaves:
no traceback, no "Exception ignored", status 141 (what a shell reports for SIGPIPE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proxy.cli.pipes import BROKEN_PIPE_STATUS
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.sqlite import SqliteSink
from tests.factories import audited

ROOT = Path(__file__).resolve().parents[3]
RECORDS = 300
"""Enough that `export` writes far more than a pipe buffer (64 KiB) holds."""


def curator() -> str:
    return str(Path(sys.executable).parent / "curator")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("audit") / "audit.db"
    sink = SqliteSink(str(path))
    builder = RecordBuilder(Redactor.build())
    now = time.time()
    text = "tool output line\n" * 200
    for i in range(RECORDS):
        entry = audited(
            id=f"req-{i:04d}",
            time=now - RECORDS + i,
            route="default",
            policy="chat",
            model="gpt-4o",
            original=[{"role": "user", "content": text}],
            curated=[{"role": "user", "content": "short"}],
            status=200,
        )
        sink.write(builder.build(entry))
    sink.close()
    return str(path)


def commands(store: str, request: Path) -> dict[str, list[str]]:
    return {
        "help": ["--help"],
        "check": ["check", "--config", str(ROOT / "config.example.yaml")],
        "simulate": ["simulate", "--config", str(ROOT / "config.example.yaml"), str(request)],
        "audit list": ["audit", "list", "--path", store],
        "audit list --json": ["audit", "list", "--json", "--path", store],
        "audit show": ["audit", "show", "req-0001", "--path", store],
        "audit show --json": ["audit", "show", "req-0001", "--json", "--path", store],
        "audit diff": ["audit", "diff", "req-0001", "--path", store],
        "audit export": ["audit", "export", "--since", "1d", "--path", store],
    }


def to_a_closed_pipe(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run with stdout a pipe whose reader has already gone: the first write fails."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [curator(), *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
            cwd=ROOT,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "name",
    [
        "help",
        "check",
        "simulate",
        "audit list",
        "audit list --json",
        "audit show",
        "audit show --json",
        "audit diff",
        "audit export",
    ],
)
def test_a_reader_that_left_ends_the_command_quietly(name: str, store: str, tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    )
    done = to_a_closed_pipe(commands(store, request)[name])
    assert done.stderr == ""
    # argparse itself drops write errors of --help (and exits 0); ours are reported.
    assert done.returncode == (0 if name == "help" else BROKEN_PIPE_STATUS)


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_head_takes_one_line(store: str, json_flag: list[str]) -> None:
    """The shell pipelines from the issue, with pipefail so the writer's status shows."""
    for args in (["list", *json_flag], ["export", "--since", "1d"]):
        line = " ".join([curator(), "audit", *args, "--path", store])
        done = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {line} | head -1"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.stderr == "", done.stderr
        assert len(done.stdout.splitlines()) == 1
        assert done.returncode in (0, BROKEN_PIPE_STATUS)
        if args[0] == "export":  # far more than a pipe holds: the writer must see the break
            assert done.returncode == BROKEN_PIPE_STATUS


def test_a_reader_that_stays_gets_everything(store: str) -> None:
    done = subprocess.run(
        [curator(), "audit", "export", "--since", "1d", "--path", store],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == RECORDS
