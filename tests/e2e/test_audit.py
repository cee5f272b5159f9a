"""The audit log through the real proxy: the openai SDK sends an agent conversation full of
planted secrets (every built-in kind, plus an operator pattern) and the strict fake answers
with more, streamed and split across chunks. `curator audit show` gives back both message
sets, and no secret reaches any byte of the audit files or the logs."""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import string
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from openai import OpenAI

from bench.conversations import growing_requests
from proxy.cli.main import main as curator
from proxy.config.loader import Config, load_config
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.redact import Redactor, custom_detector
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import Behavior, FakeOpenAI, ToolCall

pytestmark = pytest.mark.e2e

BUILTIN_KINDS = (
    "private_key",
    "anthropic_key",
    "openai_key",
    "aws_access_key",
    "github_token",
    "slack_token",
    "jwt",
    "bearer_token",
)
CUSTOM = ("employee_id", r"EMP-[0-9]{6}")
ALNUM = string.ascii_letters + string.digits


def write_config(folder: Path, upstream: str, *, audit: str, metrics: str = "") -> Path:
    """A config file for the proxy under test: the fake upstream, an agent policy."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(
        f"""
upstreams:
  fake: {{base_url: "{upstream}/v1", read_timeout_s: 30}}
policies:
  agent:
    curators:
      - system_preservation: {{pin_first_user: true}}
      - tool_result_truncation: {{max_tokens: 400, keep_recent: 2}}
      - token_budget: {{}}
      - tool_pair_coherence: {{}}
  summary:
    curators:
      - summarizer: {{upstream: fake, model: gpt-4o-mini, trigger_tokens: 800}}
      - tool_pair_coherence: {{}}
routes:
  - {{name: default, upstream: fake, policy: agent, allow_policy_header: true}}
audit: {audit}
{metrics}
"""
    )
    return path


@contextmanager
def serving(config: Config) -> Iterator[str]:
    """The proxy for `config` on a loopback port; stopping it flushes the audit log."""
    app = create_app(config, watch_interval_s=None)
    options = {**uvicorn_options(), "log_level": "warning", "timeout_graceful_shutdown": 3}
    with ServerThread(app, **options) as server:
        yield server.origin


@dataclass(frozen=True)
class Secret:
    kind: str
    text: str
    core: str
    """A random part of `text` that survives JSON escaping: found anywhere, it leaked."""


def token(n: int, alphabet: str = ALNUM) -> str:
    return "".join(random.choices(alphabet, k=n))


def pem(core: str) -> str:
    line = base64.b64encode(os.urandom(30)).decode()
    body = "".join(f"{line[:20]}{core}{line[20:]}\n" for _ in range(4))
    return f"-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----"


def plant() -> dict[str, Secret]:
    """A fresh secret of every kind; a second of some, for the upstream's answers."""
    upper = string.ascii_uppercase + string.digits
    jwt_head = "eyJhbGciOiJIUzI1NiJ9"
    makers = {
        "private_key": lambda c: pem(c),
        "anthropic_key": lambda c: "sk-ant-api03-" + c,
        "openai_key": lambda c: "sk-proj-" + c,
        "github_token": lambda c: "ghp_" + c + "A1b2C3d4E5f6",
        "slack_token": lambda c: "xoxb-1234-" + c,
        "jwt": lambda c: f"{jwt_head}.eyJ{c}.sig_{token(12)}",
        "bearer_token": lambda c: c + "9._x",
    }
    planted = {}
    for kind, make in makers.items():
        for key in (kind, kind + "2"):
            core = token(28)
            planted[key] = Secret(kind, make(core), core)
    for key, prefix in (("aws_access_key", "AKIA"), ("aws_access_key2", "ASIA")):
        core = token(16, upper)
        planted[key] = Secret("aws_access_key", prefix + core, core)
    employee = f"EMP-{random.randrange(10**6):06d}"  # six digits alone could occur by chance
    planted["employee_id"] = Secret("employee_id", employee, employee)
    return planted


def agent_conversation(s: dict[str, Secret]) -> list[dict[str, Any]]:
    """Secrets in system, user and tool messages, and in JSON-escaped tool-call arguments."""
    write = json.dumps({"path": "id_rsa", "content": s["private_key"].text})
    # The key's first letter spelled as a JSON escape, inside the arguments' own JSON.
    escaped = '{"key": "\\u0073' + s["anthropic_key"].text[1:] + '"}'
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "write", "arguments": write}},
        {"id": "call_2", "type": "function", "function": {"name": "auth", "arguments": escaped}},
    ]
    return [
        {"role": "system", "content": f"You deploy things. Key: {s['openai_key'].text}"},
        {
            "role": "user",
            "content": f"AWS {s['aws_access_key'].text}, I am {s['employee_id'].text}; "
            f"send Authorization: Bearer {s['bearer_token'].text}",
        },
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_1", "content": f"ok; jwt {s['jwt'].text}"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": json.dumps({"slack": s["slack_token"].text, "gh": s["github_token"].text}),
        },
        {"role": "user", "content": "Now tell me what you did."},
    ]


def leaks(data: str | bytes, secrets: dict[str, Secret]) -> list[str]:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return [name for name, s in secrets.items() if s.core in text]


def wait_for_records(db: Path, ids: list[str]) -> None:
    """Until the writer thread has stored them (bounded: the outcome is what is asserted)."""
    for _ in range(400):
        try:
            reader = SqliteReader(str(db))
        except FileNotFoundError:  # no file yet, or its tables not yet
            time.sleep(0.025)
            continue
        try:
            if all(reader.get(rid) is not None for rid in ids):
                return
        finally:
            reader.close()
        time.sleep(0.025)
    raise AssertionError(f"audit records {ids} were not written")


def audit_files(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.glob("audit.*")))


def show(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    capsys.readouterr()
    assert curator(["audit", *args]) == 0
    out = capsys.readouterr().out
    return orjson.loads(out) if "--json" in args else out


@pytest.fixture
def secrets() -> dict[str, Secret]:
    return plant()


def redactor() -> Redactor:
    return Redactor.build(custom=[custom_detector(*CUSTOM)])


def test_audit_keeps_both_message_sets_and_no_secret(
    tmp_path: Path,
    fake: FakeOpenAI,
    secrets: dict[str, Secret],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    s = secrets
    audit = (
        f'{{path: audit.db, redact: {{patterns: [{{name: {CUSTOM[0]}, regex: "{CUSTOM[1]}"}}]}}}}'
    )
    path = write_config(tmp_path, fake.origin, audit=audit)
    messages = agent_conversation(s)
    fake.queue(
        Behavior(reply=f"Done: {s['aws_access_key2'].text} and {s['github_token2'].text}."),
        Behavior(reply=f"Key:\n{s['private_key2'].text}\nthen Bearer {s['bearer_token2'].text}"),
        Behavior(tool_calls=(ToolCall("deploy", json.dumps({"t": s["jwt2"].text}), "call_9"),)),
    )
    with serving(load_config(path)) as origin:
        client = OpenAI(base_url=origin + "/v1", api_key=s["openai_key"].text, max_retries=0)
        with client:
            create = client.chat.completions.with_raw_response.create
            plain = create(model="gpt-4o", messages=messages)
            text_stream = create(model="gpt-4o", messages=messages, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in text_stream.parse())
            call_stream = create(model="gpt-4o", messages=messages, stream=True)
            deltas = [c.choices[0].delta for c in call_stream.parse() if c.choices]
        ids = [r.headers["x-curator-request-id"] for r in (plain, text_stream, call_stream)]
        wait_for_records(tmp_path / "audit.db", ids)
        # While the proxy runs the WAL holds the newest pages: scan it too.
        assert (tmp_path / "audit.db-wal").is_file()
        assert leaks(audit_files(tmp_path), s) == []
    assert plain.parse().choices[0].message.content == (
        f"Done: {s['aws_access_key2'].text} and {s['github_token2'].text}."
    )
    assert text == f"Key:\n{s['private_key2'].text}\nthen Bearer {s['bearer_token2'].text}"
    arguments = "".join(
        call.function.arguments or ""
        for d in deltas
        for call in d.tool_calls or ()
        if call.function
    )
    assert arguments == json.dumps({"t": s["jwt2"].text})
    upstream_saw = [r.json()["messages"] for r in fake.requests]

    clean = redactor()
    records = [show(capsys, "show", rid, "--json", "--config", str(path)) for rid in ids]
    for record, seen in zip(records, upstream_saw, strict=True):
        assert record["original"] == clean.value(messages)
        assert record["curated"] == clean.value(seen)
    assert records[0]["tokens_before"] == int(plain.headers["x-curator-tokens-before"])
    assert records[1]["response"]["text"] == clean.text(text)
    assert records[2]["response"]["tool_calls"][0]["function"]["name"] == "deploy"
    dump = orjson.dumps(records).decode()
    for kind in (*BUILTIN_KINDS, CUSTOM[0]):
        assert f"[REDACTED:{kind}]" in dump, kind
    assert leaks(dump, s) == []
    assert leaks(audit_files(tmp_path), s) == []
    assert leaks(show(capsys, "diff", ids[0], "--config", str(path)), s) == []
    assert caplog.records, "logs were captured"
    assert leaks(caplog.text + capsys.readouterr().err, s) == []


def test_jsonl_sink_writes_parseable_redacted_lines(
    tmp_path: Path, fake: FakeOpenAI, secrets: dict[str, Secret], capsys: pytest.CaptureFixture[str]
) -> None:
    s = secrets
    path = write_config(tmp_path, fake.origin, audit="{sink: jsonl, path: audit.jsonl}")
    fake.queue(Behavior(reply=f"Bearer {s['bearer_token2'].text}"))
    with serving(load_config(path)) as origin, httpx.Client(base_url=origin) as http:
        body = {"model": "gpt-4o", "messages": agent_conversation(s), "stream": True}
        answers = [http.post("/v1/chat/completions", json=body) for _ in range(2)]
        answers.append(http.post("/v1/chat/completions", content=b"{broken"))
    lines = (tmp_path / "audit.jsonl").read_bytes().splitlines()
    records = [orjson.loads(line) for line in lines]
    assert [r["id"] for r in records] == [a.headers["x-curator-request-id"] for a in answers]
    assert records[0]["response"]["text"] == "Bearer [REDACTED:bearer_token]"
    assert records[2]["skip_reason"] == "invalid_json"
    assert records[0]["original"] == Redactor.build().value(agent_conversation(s))
    assert leaks(b"\n".join(lines), {k: v for k, v in s.items() if k != "employee_id"}) == []
    shown = show(capsys, "show", records[1]["id"], "--json", "--config", str(path))
    assert shown == records[1]


def test_audit_storage_stays_well_under_a_third_of_the_bytes_sent(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """A realistic coding agent resending its history every turn; no `audit:` section, so
    the default SQLite store, beside the config file."""
    path = write_config(tmp_path, fake.origin, audit="null")
    sent = 0
    with serving(load_config(path)) as origin, httpx.Client(base_url=origin) as http:
        for request in growing_requests(seed=5, turns=30):
            body = orjson.dumps(request)
            sent += len(body)
            assert http.post("/v1/chat/completions", content=body).status_code == 200
    stored = sum(p.stat().st_size for p in tmp_path.glob("curator-audit.db*"))
    assert (tmp_path / "curator-audit.db").is_file()
    assert len(fake.requests) == 30
    assert stored < sent / 4, (stored, sent)  # measured: about 11%
