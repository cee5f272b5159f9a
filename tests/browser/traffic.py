"""An audit store filled by real proxied traffic, for the viewer's socket and browser tests.

The proxy runs under uvicorn with the SQLite sink, an admin listener (metrics.port) that
serves the viewer, and a small-window model, so an agent conversation sent with the openai
SDK overflows and gets curated: old tool results truncated, old turns dropped. One request
carries a `<script>` in its text, one is a summarizer route, one fails upstream.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai import OpenAI

from proxy.config.loader import load_config
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.e2e.test_audit import wait_for_records
from tests.fakes.openai_rules import CONTEXT, error_body
from tests.fakes.servers import HOST, ServerThread
from tests.fakes.upstream import Behavior, FakeOpenAI

MODEL = "gpt-4o-viewer"
WINDOW = 12_000
ADMIN_KEY = "admin-key-for-viewer-tests"
SCRIPT = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>"
SECRET = "sk-proj-" + "Q7w" * 12
"""Planted in a message: the store must hold it redacted, and so must every page."""


@dataclass(frozen=True)
class Traffic:
    db: Path
    config: Path
    proxy_origin: str
    """The client-facing port while the proxy runs."""
    admin_origin: str
    """The admin listener (the viewer) while the proxy runs; nothing listens afterwards."""
    ids: dict[str, str]
    """Named request ids: `first`, `curated` (the last, most curated turn), `script`,
    `summary_parent`, `failed`, `rescued_parent` (the second run's last turn, which the
    upstream first refused as too long)."""
    conversation: list[str]
    """The agent conversation's request ids, oldest first."""
    second_run: list[str]
    """A second run of the same task (same system prompt and first message), oldest first."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def write_config(folder: Path, upstream: str, admin_port: int, *, keys: bool) -> Path:
    admin = f'admin_keys: ["{ADMIN_KEY}"]' if keys else ""
    path = folder / "config.yaml"
    path.write_text(
        f"""
upstreams:
  fake: {{base_url: "{upstream}/v1", read_timeout_s: 30}}
models:
  {MODEL}: {{context_window: {WINDOW}}}
policies:
  agent:
    curators:
      - system_preservation: {{pin_first_user: true}}
      - tool_result_truncation: {{max_tokens: 300, keep_recent: 2}}
      - token_budget: {{}}
      - tool_pair_coherence: {{}}
  summary:
    curators:
      - summarizer: {{upstream: fake, model: gpt-4o-mini, trigger_tokens: 800}}
      - tool_pair_coherence: {{}}
routes:
  - {{name: default, upstream: fake, policy: agent, allow_policy_header: true}}
audit: {{path: audit.db}}
metrics: {{port: {admin_port}, host: {HOST}}}
auth: {{{admin}}}
"""
    )
    return path


def tool_output(turn: int) -> str:
    lines = [
        f"src/module_{turn}/file_{i}.py:{i * 7}: def handler_{i}(request): ..." for i in range(160)
    ]
    return "\n".join(lines)


def agent_turns(turns: int, run: int = 1) -> Iterator[list[dict[str, Any]]]:
    """Each request of a growing agent conversation: the whole history, resent. Runs of
    one task differ in what the model answered."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use tools; be brief."},
        {"role": "user", "content": f"Find every request handler and list them. Token {SECRET}"},
    ]
    for turn in range(turns):
        call_id = f"call_{turn}"
        args = json.dumps({"pattern": f"def handler_ in module_{turn}"})
        history += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "grep", "arguments": args},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": tool_output(turn)},
        ]
        yield [*history, {"role": "user", "content": f"Turn {turn}: continue."}]
        answer = f"Module {turn} has 160 handlers." + (f" (run {run})" if run > 1 else "")
        history.append({"role": "assistant", "content": answer})


@contextmanager
def proxied_traffic(folder: Path, fake: FakeOpenAI, *, keys: bool) -> Iterator[Traffic]:
    """Run the proxy, send the traffic, and yield while the proxy (and its viewer) run."""
    admin_port = free_port()
    config = write_config(folder, fake.origin, admin_port, keys=keys)
    app = create_app(load_config(config), watch_interval_s=None)
    options = {**uvicorn_options(), "log_level": "warning", "timeout_graceful_shutdown": 3}
    with ServerThread(app, **options) as server:
        client = OpenAI(base_url=server.origin + "/v1", api_key="sk-client-viewer", max_retries=0)
        ids: dict[str, str] = {}
        conversation: list[str] = []
        with client:
            create = client.chat.completions.with_raw_response.create
            for messages in agent_turns(8):
                reply = create(model=MODEL, messages=messages)  # type: ignore[arg-type]
                conversation.append(reply.headers["x-curator-request-id"])
            script = create(model="gpt-4o", messages=[{"role": "user", "content": SCRIPT}])
            ids["script"] = script.headers["x-curator-request-id"]
            long_chat = [
                {"role": "user", "content": f"Question {i}: " + "words " * 120}
                for i in range(0, 12, 2)
            ]
            chat: list[dict[str, Any]] = []
            for i, msg in enumerate(long_chat):
                chat += [msg, {"role": "assistant", "content": f"Answer {i}: " + "more " * 120}]
            chat.append({"role": "user", "content": "Sum it up."})
            summary = create(
                model="gpt-4o",
                messages=chat,
                extra_headers={"x-curator-policy": "summary"},  # type: ignore[arg-type]
            )
            ids["summary_parent"] = summary.headers["x-curator-request-id"]
            fake.queue(Behavior(status=429, body=b'{"error": {"message": "slow down"}}'))
            try:
                create(model="gpt-4o", messages=[{"role": "user", "content": "Rate me."}])
            except Exception as exc:  # the SDK raises on 429: its id is in the response
                ids["failed"] = exc.response.headers["x-curator-request-id"]  # type: ignore[attr-defined]
            second_run = second(create, fake)
        ids["first"], ids["curated"] = conversation[0], conversation[-1]
        ids["rescued_parent"] = second_run[-1]
        wait_for_records(folder / "audit.db", [*ids.values(), *conversation, *second_run])
        admin_origin = f"http://{HOST}:{admin_port}"
        yield Traffic(
            folder / "audit.db", config, server.origin, admin_origin, ids, conversation, second_run
        )


def second(create: Any, fake: FakeOpenAI) -> list[str]:
    """A second run of the agent's task, three turns; the upstream refuses the last one as too
    long once (the proxy rescues it: curates again and resends)."""
    sent: list[str] = []
    for n, messages in enumerate(agent_turns(3, run=2)):
        if n == 2:
            message = CONTEXT.format(window=WINDOW, tokens=WINDOW + 900)
            fake.queue(
                Behavior(
                    status=400, body=error_body(message, "messages", "context_length_exceeded")
                )
            )
        reply = create(model=MODEL, messages=messages)
        sent.append(reply.headers["x-curator-request-id"])
    return sent
