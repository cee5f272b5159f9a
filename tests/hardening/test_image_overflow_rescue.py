"""Issue U item 8, over real sockets: a Responses request whose screenshots the proxy can
only guess the size of (`input_image` by `file_id`, `computer_call_output` screenshots)
overflows an upstream that counts them at their real, larger size. The upstream's 400
(`context_length_exceeded`, no numbers: the Responses API's wording) is rescued as chat's
is: curated again to half of what was refused, and resent once. Was: tightened by 10%,
which cut nothing, and the client got the 400."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import tiktoken
from starlette.types import Receive, Scope, Send

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.policy import Policy
from policies.system import SystemPreservation
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from tests.fakes.openai_rules import error_body
from tests.fakes.responses_rules import CONTEXT, count_prompt
from tests.hardening.support import running_proxy, upstream_server

MODEL = "gpt-4o"
WINDOW = 128_000
"""The model's window: the proxy's table and the upstream agree on it."""
REAL_IMAGE_TOKENS = 3_500
"""What the upstream counts per screenshot (a large one); the proxy counts 1,445 at most."""
STEPS = 40


class ImageCountingUpstream:
    """A Responses upstream that prices each image at `REAL_IMAGE_TOKENS` and everything
    else as the strict fake does; over `WINDOW` it answers the API's overflow 400."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self._enc = tiktoken.get_encoding("o200k_base")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] != "/v1/responses":
            await _answer(send, 404, b'{"error": {"message": "not here"}}')
            return
        body = orjson.loads(raw)
        tokens = self._count(body)
        self.counts.append(tokens)
        if tokens > WINDOW:
            await _answer(send, 400, error_body(CONTEXT, "input", "context_length_exceeded"))
            return
        await _answer(send, 200, orjson.dumps(_completed(tokens)))

    def _count(self, body: dict[str, Any]) -> int:
        images = sum(_images(item) for item in body["input"])
        plain = [_without_images(item) for item in body["input"]]
        return count_prompt({**body, "input": plain}, self._enc) + images * REAL_IMAGE_TOKENS


def _images(item: dict[str, Any]) -> int:
    if item.get("type") == "computer_call_output":
        return 1
    content = item.get("content")
    parts = content if isinstance(content, list) else []
    return sum(1 for part in parts if part.get("type") == "input_image")


def _without_images(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") == "computer_call_output":
        return {k: v for k, v in item.items() if k != "output"}
    content = item.get("content")
    if isinstance(content, list):
        return {**item, "content": [p for p in content if p.get("type") != "input_image"]}
    return item


def _completed(tokens: int) -> dict[str, Any]:
    text = {"type": "output_text", "text": "Done.", "annotations": []}
    message = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant"}
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": MODEL,
        "output": [{**message, "content": [text]}],
        "usage": {"input_tokens": tokens, "output_tokens": 2, "total_tokens": tokens + 2},
    }


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def computer_use_history(steps: int) -> list[dict[str, Any]]:
    """A computer-use run: the task with a screenshot by file id, then `steps` clicks,
    each answered with a screenshot by file id, then the next instruction."""
    first = [
        {"type": "input_text", "text": "Open the settings and turn on dark mode."},
        {"type": "input_image", "file_id": "file-start", "detail": "high"},
    ]
    items: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for k in range(steps):
        action = {"type": "click", "button": "left", "x": 10 + k, "y": 20 + k}
        call = {"type": "computer_call", "id": f"cu_{k}", "call_id": f"call_{k}"}
        items.append({**call, "action": action, "pending_safety_checks": [], "status": "done"})
        shot = {"type": "computer_screenshot", "file_id": f"file-shot-{k}"}
        items.append({"type": "computer_call_output", "call_id": f"call_{k}", "output": shot})
    items.append({"role": "user", "content": "Now close the window."})
    return items


@pytest.fixture
def upstream() -> Iterator[tuple[ImageCountingUpstream, str]]:
    app = ImageCountingUpstream()
    with upstream_server(app) as server:
        yield app, server.origin


def _config(origin: str) -> Config:
    pins = SystemPreservation(pin_first_user=True)
    chain = Chain((pins, TokenBudget(), ToolPairCoherence()))
    return Config(
        source="<hardening>",
        server=ServerConfig(),
        upstreams={"hostile": UpstreamConfig("hostile", origin + "/v1", read_timeout_s=30)},
        policies={"agent": Policy("agent", chain, pins=pins.pin_spec())},
        routes=(Route("default", "hostile", "agent"),),
    )


def test_a_screenshot_overflow_is_rescued(upstream: tuple[ImageCountingUpstream, str]) -> None:
    hostile, origin = upstream
    body = {"model": MODEL, "input": computer_use_history(STEPS), "truncation": "disabled"}
    with running_proxy(_config(origin)) as proxy, httpx.Client(timeout=30) as http:
        response = http.post(proxy.origin + "/v1/responses", json=body)
    assert response.status_code == 200, (response.text, hostile.counts)
    assert response.headers["x-curator-rescued"] == "1"
    refused, accepted = hostile.counts
    assert refused > WINDOW >= accepted
    first = proxy.records[-1].rescued  # the refused attempt is kept in the record
    assert first is not None
    assert first.tokens_after is not None
    assert int(response.headers["x-curator-tokens-after"]) <= first.tokens_after // 2
