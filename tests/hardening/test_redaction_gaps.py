"""Secrets in the seams redaction used to miss, through the wired proxy on real sockets:
after a percent-encoded `=`, glued to an `_`, an AWS secret access key after its name,
`Authorization: Basic`, a key split across two text parts of one message, and a key used
as a JSON object key. Each is planted in the request (so in the original and in the curated
copy) and in the upstream's answer; no byte of the JSONL file, the SQLite database, its WAL
or its shared-memory file may hold one.
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from policies.chain import Chain
from policies.policy import Policy
from policies.tool_results import ToolResultTruncation
from proxy.config.audit import AuditConfig
from proxy.config.loader import Route
from tests.hardening.support import (
    CHAT,
    RunningProxy,
    hardening_config,
    running_proxy,
    upstream_server,
    wait_for,
)
from tests.hardening.upstreams import Scripted, ScriptedUpstream, sse_events

# Built at run time: no token-shaped literal sits in the source.
OPENAI = "sk-proj-" + "Gq4_Lm8-Wd2_" * 4
GITHUB = "ghp_" + "Zx9Cv8Bn7Mq6Wd5Ef4Rt3Yu2Io1Pa0Sd9Fg8"
AKIA = "AKIA" + "R7TQ2WX9ZK4PLM3N"
ANTHROPIC = "sk-ant-api03-" + "Tn5_Vb6-" * 4
AWS_SECRET = "Gaps7+Kq2/Lm9Np4Rs6T" + "u8Wx0Yz2Ab4Cd6Ef8Gh0"
BASIC = base64.b64encode(b"ci-bot:" + b"gaps-Tr0ub4dor-3horse").decode()
GLUED_NAME = "OPENAI_API_KEY_" + "sk-" + "Nm3Kl9Jh7Gf5Ds3Aq1Wz8Xc6"
PEM_BODY = [
    "Gaps" + f"{i:02d}" + "MIIEowIBAAKCAQEAx4Xf9qLm0a1Bc2De3Fg4Hi5Jk6Lm7No8Pq9Rs0Tu"
    for i in range(20)
]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"

FRAGMENTS = {
    "openai": (OPENAI[-16:], OPENAI[8:24]),
    "github": (GITHUB[-16:], GITHUB[4:20]),
    "aws_access": (AKIA,),
    "anthropic": (ANTHROPIC[-16:],),
    "aws_secret": (AWS_SECRET[:16], AWS_SECRET[-16:]),
    "basic": (BASIC[:16], BASIC[-12:]),
    "glued_name": (GLUED_NAME[-16:],),
    "private_key": tuple(line[:16] for line in PEM_BODY),
}


def leaks(data: str) -> list[str]:
    return [kind for kind, found in FRAGMENTS.items() if any(f in data for f in found)]


def _forms() -> str:
    return "\n".join(
        (
            f"GET https://api.example.com/v1?key%3D{OPENAI}&gh=%3d{GITHUB}&id=%3D{AKIA}",
            f"double-encoded: token%253D{ANTHROPIC}",
            f"OPENAI_API_KEY_{OPENAI} and GITHUB_TOKEN_{GITHUB}",
            f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
            f"aws_secret_access_key = {AWS_SECRET}",
            f'{{"aws_secret_access_key": "{AWS_SECRET}"}}',
            f"AWS_SECRET_ACCESS_KEY: {AWS_SECRET}",
            f"curl -H 'Authorization: Basic {BASIC}' https://ci.example.com",
        )
    )


def _messages() -> list[dict[str, Any]]:
    half = len(OPENAI) // 2
    arguments = orjson.dumps({OPENAI: {"token": "x"}, "nested": {GITHUB: 1}}).decode()
    call = {"id": "call_1", "type": "function", "function": {"name": "sh", "arguments": arguments}}
    filler = " filler words to truncate" * 60
    return [
        {"role": "system", "content": "You deploy. " + _forms()},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "my key is " + OPENAI[:half]},
                {"type": "text", "text": OPENAI[half:] + " please keep it"},
            ],
            "name": GLUED_NAME,
        },
        {"role": "assistant", "content": None, "tool_calls": [call], AKIA: "unknown field"},
        {
            "role": "tool",
            "tool_call_id": "call_1",
            # Truncated to a head and a tail, so the curated copy differs, and the cuts go
            # through secrets: what is left of them must go too.
            "content": _forms() + PEM + filler + PEM + _forms(),
        },
        {"role": "user", "content": "again: " + _forms(), "metadata": {ANTHROPIC: [OPENAI]}},
    ]


def _answers() -> list[Scripted]:
    arguments = orjson.dumps({OPENAI: _forms()}).decode()
    completion = {
        "id": "c1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": _forms(),
                    "tool_calls": [
                        {
                            "id": "t",
                            "type": "function",
                            "function": {"name": "f", "arguments": arguments},
                        }
                    ],
                },
                "finish_reason": "stop",
            }
        ],
    }
    forms = _forms()
    deltas = [{"role": "assistant", "content": ""}]
    deltas += [{"content": forms[i : i + 7]} for i in range(0, len(forms), 7)]
    error = orjson.dumps({"error": {"message": forms, "param": {OPENAI: GLUED_NAME}}})
    json_type = b"application/json"
    return [
        Scripted((orjson.dumps(completion),), content_type=json_type),
        Scripted(tuple(sse_events(*deltas))),
        Scripted((error,), status=400, content_type=json_type),
    ]


@pytest.fixture(params=["jsonl", "sqlite"])
def wired(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunningProxy, Path]]:
    sink = request.param
    path = tmp_path / f"audit.{sink}"
    with upstream_server(ScriptedUpstream(*_answers())) as server:
        config = hardening_config(server.origin)
        cut = Policy("cut", Chain((ToolResultTruncation(max_tokens=60, keep_recent=0),)))
        config = replace(
            config,
            policies={**config.policies, "cut": cut},
            routes=(Route("default", "fake", "cut"),),
            audit=AuditConfig(sink=sink, path=str(path)),
        )
        with running_proxy(config) as proxy:
            yield proxy, path


def test_no_seam_secret_reaches_any_audit_file(wired: tuple[RunningProxy, Path]) -> None:
    proxy, path = wired
    body: dict[str, Any] = {"model": "gpt-4o", "messages": _messages()}
    with httpx.Client(base_url=proxy.origin, timeout=30) as http:
        assert http.post(CHAT, content=orjson.dumps(body)).status_code == 200
        assert http.post(CHAT, content=orjson.dumps({**body, "stream": True})).status_code == 200
        assert http.post(CHAT, content=orjson.dumps(body)).status_code == 400
    wait_for(lambda: _count(path) == 3, "three audit records")
    files = sorted(path.parent.glob("audit.*"))
    if path.suffix == ".sqlite":  # read while the proxy runs: the WAL holds the new pages
        assert {p.name for p in files} >= {"audit.sqlite", "audit.sqlite-wal", "audit.sqlite-shm"}
    stored = {p.name: p.read_bytes().decode("latin-1") for p in files}
    assert {name: leaks(data) for name, data in stored.items()} == {key: [] for key in stored}
    joined = "".join(stored.values())
    for label in ("openai_key", "github_token", "aws_access_key", "aws_secret_key", "basic_auth"):
        assert f"[REDACTED:{label}]" in joined
    assert "tool_result_truncation" in joined  # the curated copy was stored too


def _count(path: Path) -> int:
    if not path.exists():
        return 0
    if path.suffix == ".jsonl":
        return len(path.read_bytes().splitlines())
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        table = next((t for t in tables if "request" in t or "record" in t), None)
        return int(db.execute(f"select count(*) from {table}").fetchone()[0]) if table else 0
