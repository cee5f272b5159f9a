"""Messages (`/v1/messages`) records read back by every reader: the viewer's pages, `curator
audit list/show`, `curator simulate` from the store and `curator report`.

A real proxy on loopback, an Anthropic upstream (the strict fake), the SQLite audit and the
admin listener; the official `anthropic` SDK runs a tool loop with extended thinking and a
system prompt in two blocks, on a window small enough that the last turns are curated.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest

from proxy.cli.main import main as curator
from proxy.config.loader import load_config
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.browser.traffic import free_port
from tests.e2e.test_audit import wait_for_records
from tests.fakes.anthropic_upstream import FakeAnthropic, Reply, ToolUse
from tests.fakes.servers import HOST, ServerThread

MODEL = "claude-sonnet-4-5-records"
WINDOW = 9_000
SYSTEM: Any = [
    {"type": "text", "text": "You are careful."},
    {"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}},
]
TOOLS: Any = [
    {
        "name": "read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


@dataclass(frozen=True)
class Store:
    db: Path
    admin: str
    ids: list[str]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    folder = tmp_path_factory.mktemp("messages-records")
    fake = FakeAnthropic(windows={MODEL: WINDOW})
    with ServerThread(fake.app) as upstream:
        admin = free_port()
        config = folder / "config.yaml"
        config.write_text(
            f"""
upstreams:
  claude: {{kind: anthropic, base_url: "{upstream.origin}"}}
models:
  {MODEL}: {{context_window: {WINDOW}}}
policies:
  coding: preset:coding-agent
routes:
  - {{name: claude, upstream: claude, policy: coding}}
audit: {{path: audit.db}}
metrics: {{port: {admin}, host: {HOST}}}
"""
        )
        app = create_app(load_config(config), watch_interval_s=None)
        with ServerThread(app, **{**uvicorn_options(), "log_level": "warning"}) as proxy:
            ids = _tool_loop(fake, proxy.origin, steps=7)
            wait_for_records(folder / "audit.db", ids)
            yield Store(folder / "audit.db", f"http://{HOST}:{admin}", ids)
    assert fake.rejected == []


def _tool_loop(fake: FakeAnthropic, origin: str, steps: int) -> list[str]:
    ids = []
    messages: list[Any] = [{"role": "user", "content": "Read every file and sum them up."}]
    with anthropic.Anthropic(base_url=origin, api_key="sk-ant-records", max_retries=0) as client:
        for step in range(steps):
            use = ToolUse("read", {"path": f"src/f{step}.py"})
            fake.queue(Reply(text=f"step {step}", tool_uses=(use,), thinking=f"think {step}"))
            raw = client.messages.with_raw_response.create(
                model=MODEL,
                max_tokens=2048,
                thinking={"type": "enabled", "budget_tokens": 1024},
                system=SYSTEM,
                tools=TOOLS,
                messages=messages,
            )
            ids.append(raw.headers["x-curator-request-id"])
            blocks = [b.model_dump(exclude_none=True) for b in raw.parse().content]
            tool_use = next(b for b in blocks if b["type"] == "tool_use")
            result = f"# src/f{step}.py\n" + "total = total + 1\n" * 300
            messages += [
                {"role": "assistant", "content": blocks},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": tool_use["id"], "content": result}
                    ],
                },
            ]
    return ids


def _page(store: Store, path: str) -> str:
    with urllib.request.urlopen(store.admin + path, timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert curator(list(args)) == 0
    return capsys.readouterr().out


def test_the_viewer_shows_a_curated_messages_request(store: Store) -> None:
    page = _page(store, f"/requests/{store.ids[-1]}")
    assert "<dt>Kind</dt><dd>anthropic</dd>" in page
    assert "You are careful.\nRules." in page  # the system blocks, each on its own line
    assert "<code>read({&#34;path&#34;:&#34;src/f6.py&#34;})</code>" in page  # a tool_use
    assert "total = total + 1" in page  # a tool_result
    assert page.count('<span class="chip">thinking part</span>') >= len(store.ids)
    assert "dropped the 3 oldest unit(s)" in page  # what curation did, and who
    listing = _page(store, "/requests")
    assert all(rid in listing for rid in store.ids)


def test_audit_list_and_show_read_messages_records(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = _run(capsys, "audit", "list", "--path", str(store.db), "--json")
    rows = [orjson.loads(line) for line in listed.splitlines()]
    assert {(r["id"], r["kind"]) for r in rows} == {(rid, "anthropic") for rid in store.ids}
    shown = _run(capsys, "audit", "show", store.ids[-1], "--path", str(store.db))
    assert "  [0] system:\n      You are careful.\n      Rules.\n" in shown
    assert '-> read({"path":"src/f6.py"})' in shown
    assert "[thinking part]" in shown


def test_simulate_recurates_messages_records_from_the_store(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(
        capsys, "simulate", "--path", str(store.db), "--since", "2000-01-01",
        "--policy", "preset:passthrough",
    )  # fmt: skip
    first = "curator simulate: requests from the audit store"
    assert out.splitlines()[0] == first
    assert out.count(f"model {MODEL}") == len(store.ids)


def test_report_prices_messages_records(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    rows = orjson.loads(
        _run(capsys, "report", "--path", str(store.db), "--since", "2000-01-01", "--json")
    )
    (row,) = rows
    assert (row["route"], row["model"], row["requests"]) == ("claude", MODEL, len(store.ids))
    assert row["tokens_after"] < row["tokens_before"]  # the last turns were curated
    assert row["input_tokens"] > 0
    assert row["actual_usd"] > 0
