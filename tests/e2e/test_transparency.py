"""What the proxy must not change: bytes, paths, statuses, error bodies, end-to-end headers."""

from __future__ import annotations

import gzip

import httpx
import orjson
import pytest

from bench.conversations import coding_agent_session
from tests.e2e.conftest import SMALL_MODEL, SMALL_WINDOW, UPSTREAM_KEY
from tests.fakes import openai_rules
from tests.fakes.upstream import Behavior, FakeOpenAI

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
ODD_BODY = (
    b'{\n  "temperature" : 0.0,"messages":[ {"content" : "caf\\u00e9 \\ud83d\\ude00 \\"q\\"",'
    b' "role":"user"} ] ,\t"model":"gpt-4o" , "x_vendor": {"b": 1, "a": [true, null]} }'
)


def test_unchanged_requests_reach_the_upstream_byte_for_byte(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    response = http.post(CHAT, content=ODD_BODY, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert fake.last.body == ODD_BODY
    assert fake.last.header("content-length") == str(len(ODD_BODY))
    assert response.content == fake.sent[0]


def test_curated_requests_change_only_messages(http: httpx.Client, fake: FakeOpenAI) -> None:
    history = coding_agent_session(seed=5, target_tokens=SMALL_WINDOW * 2, model=SMALL_MODEL)
    body = {
        "x_first": {"z": 1, "a": 2},
        "model": SMALL_MODEL,
        "messages": history,
        "temperature": 0.3,
        "max_tokens": 512,
        "metadata": {"ticket": "OPS-1"},
        "x_last": ["é", 1.5, None],
    }
    response = http.post(CHAT, content=orjson.dumps(body))
    assert response.status_code == 200, response.text
    forwarded = fake.last.json()
    assert list(forwarded) == list(body)
    for key in body:
        if key != "messages":
            assert forwarded[key] == body[key]
    assert forwarded["messages"] != history
    assert fake.last.header("content-length") == str(len(fake.last.body))
    assert "x-curator-actions" in response.headers


def test_curated_requests_keep_every_other_fields_exact_bytes(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    # Decoded and encoded again, the seed went out as 1.8446744073709552e+19 and 1E2 as 100.0.
    history = coding_agent_session(seed=6, target_tokens=SMALL_WINDOW * 2, model=SMALL_MODEL)
    head = (
        b'{ "seed": 18446744073709551617, "model": "' + SMALL_MODEL.encode() + b'",\n'
        b' "x_vendor": {"n": 1E2, "z": -0, "s": "caf\\u00e9 \\/"}, "messages" : '
    )
    tail = b' ,\t"temperature": 1E-1, "max_tokens": 512 }\n'
    response = http.post(CHAT, content=head + orjson.dumps(history) + tail)
    assert response.status_code == 200, response.text
    assert "x-curator-actions" in response.headers
    sent = fake.last.body
    assert sent[: len(head)] == head
    assert sent[-len(tail) :] == tail
    assert orjson.loads(sent[len(head) : -len(tail)]) != history


def test_non_chat_paths_are_forwarded_unchanged(http: httpx.Client, fake: FakeOpenAI) -> None:
    models = http.get("/v1/models?x=1&order=desc")
    embedding_body = b'{"model": "text-embedding-3-small", "input": ["a", "b"]}'
    embeddings = http.post("/v1/embeddings", content=embedding_body)
    get, post = fake.requests
    assert (get.method, get.path, get.query, get.body) == (
        "GET",
        "/v1/models",
        b"x=1&order=desc",
        b"",
    )
    assert (post.method, post.path, post.body) == ("POST", "/v1/embeddings", embedding_body)
    assert models.json()["object"] == "list"
    assert embeddings.json()["data"][0]["embedding"] == [0.25, -0.5, 0.125]
    assert "x-curator-request-id" in embeddings.headers
    assert "x-curator-route" not in embeddings.headers


def test_upstream_errors_are_relayed_unchanged(http: httpx.Client, fake: FakeOpenAI) -> None:
    orphan = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "call_x", "content": "orphan"},
        ],
    }
    # The `off` policy curates nothing, so the strict upstream sees the broken ordering.
    response = http.post(CHAT, content=orjson.dumps(orphan), headers={"x-curator-policy": "off"})
    assert response.status_code == 400
    assert response.content == fake.sent[0]
    assert response.json()["error"]["message"] == openai_rules.TOOL_WITHOUT_CALLS
    assert response.json()["error"]["param"] == "messages.[1].role"

    body = b'{"error": {"message": "The server is overloaded", "type": "server_error"}}'
    fake.queue(Behavior(status=503, body=body, headers=((b"retry-after", b"3"),), listing=True))
    overloaded = http.get("/v1/models")
    assert overloaded.status_code == 503
    assert overloaded.content == body
    assert overloaded.headers["retry-after"] == "3"

    missing = http.delete("/v1/nowhere/else?x=1")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "Invalid URL (DELETE /v1/nowhere/else)"


def test_hop_by_hop_headers_are_stripped_both_ways(http: httpx.Client, fake: FakeOpenAI) -> None:
    fake.queue(
        Behavior(
            headers=(
                (b"connection", b"x-upstream-hop"),
                (b"x-upstream-hop", b"internal"),
                (b"keep-alive", b"timeout=99"),
                (b"x-request-id", b"req_123"),
            )
        )
    )
    response = http.post(
        CHAT,
        content=ODD_BODY,
        headers={
            "Connection": "keep-alive, x-client-hop",
            "x-client-hop": "1",
            "Keep-Alive": "timeout=5",
            "TE": "trailers",
            "Proxy-Authorization": "Basic c2VjcmV0",
            "x-curator-policy": "agent",
            "x-custom": "kept",
            "x-title": "Café ☕".encode(),
        },
    )
    names = fake.last.header_names()
    for hop in ("x-client-hop", "keep-alive", "te", "proxy-authorization", "x-curator-policy"):
        assert hop not in names
    assert fake.last.header("x-custom") == "kept"
    assert (b"x-title", "Café ☕".encode()) in fake.last.headers  # UTF-8, byte for byte
    assert fake.last.header("host") == fake.origin.removeprefix("http://")
    assert "x-upstream-hop" not in response.headers
    assert "keep-alive" not in response.headers
    assert response.headers["x-request-id"] == "req_123"


def test_authorization_passes_through_or_is_replaced(http: httpx.Client, fake: FakeOpenAI) -> None:
    auth = {"authorization": "Bearer sk-client-own"}
    http.get("/v1/models", headers=auth)
    http.get("/v1/models", headers={**auth, "x-e2e-route": "keyed"})
    passed, replaced = fake.requests
    assert passed.header("authorization") == "Bearer sk-client-own"
    assert [v for n, v in replaced.headers if n == b"authorization"] == [
        f"Bearer {UPSTREAM_KEY}".encode()
    ]


def test_gzip_bodies_pass_through_compressed(http: httpx.Client, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(gzip=True))
    with http.stream("POST", CHAT, content=ODD_BODY) as response:
        raw = b"".join(response.iter_raw())
    assert response.headers["content-encoding"] == "gzip"
    assert raw == fake.sent[0]
    assert response.headers["content-length"] == str(len(raw))
    assert orjson.loads(gzip.decompress(raw))["object"] == "chat.completion"


CALL_X = {"id": "call_x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
BROKEN = [
    (
        [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "r"}],
        {
            "message": openai_rules.TOOL_WITHOUT_CALLS,
            "type": "invalid_request_error",
            "param": "messages.[1].role",
            "code": None,
        },
    ),
    (
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [CALL_X]},
            {"role": "user", "content": "again"},
        ],
        {
            "message": "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            "response messages: call_x",
            "type": "invalid_request_error",
            "param": "messages.[2].role",
            "code": None,
        },
    ),
    (
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": []},
        ],
        {
            "message": "Invalid 'messages[2].tool_calls': empty array. Expected an array with "
            "minimum length 1, but got an empty array instead.",
            "type": "invalid_request_error",
            "param": "messages[2].tool_calls",
            "code": "empty_array",
        },
    ),
]


@pytest.mark.parametrize(("messages", "error"), BROKEN)
def test_the_strict_upstream_rejects_what_openai_rejects(
    http: httpx.Client,
    fake: FakeOpenAI,
    messages: list[dict[str, object]],
    error: dict[str, object],
) -> None:
    body = orjson.dumps({"model": "gpt-4o", "messages": messages})
    response = http.post(CHAT, content=body, headers={"x-curator-policy": "off"})
    assert response.status_code == 400
    assert response.json() == {"error": error}
    assert fake.last.body == body


def test_the_strict_upstream_rejects_prompts_over_its_window(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    words = " ".join(f"w{i}" for i in range(SMALL_WINDOW))
    body = orjson.dumps({"model": SMALL_MODEL, "messages": [{"role": "user", "content": words}]})
    response = http.post(CHAT, content=body, headers={"x-curator-policy": "off"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["param"] == "messages"
    assert error["message"].startswith(
        f"This model's maximum context length is {SMALL_WINDOW} tokens. However, your messages "
        "resulted in "
    )
    assert fake.last.body == body
