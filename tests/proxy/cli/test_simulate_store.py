"""`curator simulate --since`: the requests straight from an audit store, SQLite or a real
PostgreSQL, simulated exactly as an export of the same records would be."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.cli.main import main
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from proxy.observability.audit.sinks.sqlite import SqliteSink
from tests.factories import assistant_calls, audited, long_text, system, tool_result, user

TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]


def conversation(turns: int) -> list[list[dict[str, Any]]]:
    """A growing agent history: each request resends the ones before it."""
    history = [system("You are a coding agent."), user("Fix the failing test.")]
    requests = []
    for i in range(turns):
        history += [assistant_calls(f"c{i}"), tool_result(f"c{i}", long_text(400, word=f"w{i}x"))]
        requests.append(list(history))
    return requests


def write(sink: Any, requests: list[list[dict[str, Any]]], now: float) -> None:
    builder = RecordBuilder(Redactor.build())
    body = {"tools": TOOLS, "max_completion_tokens": 500}
    entries = [
        audited(f"r{i:02}", now - 60 + i, model="gpt-4o", original=messages, body=body)
        for i, messages in enumerate(requests)
    ]
    records = [builder.build(entry) for entry in entries]
    sink.write_many(records)
    sink.close()


def simulate_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["simulate", "--policy", "preset:coding-agent", "--json", *argv]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        path = str(tmp_path / "audit.db")
        write(SqliteSink(path), conversation(6), time.time())
        return path
    dsn: str = request.getfixturevalue("fresh_dsn")
    write(PostgresSink(dsn), conversation(6), time.time())
    return dsn


def test_the_store_simulates_as_its_export_does(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    direct = simulate_json(capsys, "--since", "1h", "--path", store)
    capsys.readouterr()
    assert main(["audit", "export", "--since", "1h", "--path", store]) == 0
    export = tmp_path / "export.jsonl"
    export.write_text(capsys.readouterr().out)
    exported = simulate_json(capsys, str(export))
    assert len(direct["requests"]) == 6
    drop = ("line",)
    strip = [{k: v for k, v in r.items() if k not in drop} for r in direct["requests"]]
    assert strip == [{k: v for k, v in r.items() if k not in drop} for r in exported["requests"]]
    assert {r["budget"]["tools"] for r in direct["requests"]} != {0}  # the stored tools count


def test_one_conversation_and_a_time_window(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["audit", "export", "--since", "1h", "--path", store]) == 0
    key = orjson.loads(capsys.readouterr().out.splitlines()[0])["conversation"]
    assert (
        len(
            simulate_json(capsys, "--since", "1h", "--path", store, "--conversation", key[:6])[
                "requests"
            ]
        )
        == 6
    )
    assert main(["simulate", "--since", "1h", "--path", store, "--conversation", "nope"]) == 1
    assert "no audit record" in capsys.readouterr().err
    assert main(["simulate", "--since", "1s", "--until", "2h", "--path", store]) == 1


def test_input_or_since_but_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate"]) == 2
    assert main(["simulate", "x.json", "--since", "1h"]) == 2
    assert "either INPUT or --since" in capsys.readouterr().err
