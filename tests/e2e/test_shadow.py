"""Route modes over real sockets: shadow and off routes send the client's exact bytes upstream."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

import httpx
import orjson
import pytest
from openai import OpenAI

from policies.chain import Chain
from policies.policy import Policy
from policies.tool_results import ToolResultTruncation
from proxy.config.loader import (
    Config,
    Route,
    RouteMatch,
    ServerConfig,
    UpstreamConfig,
)
from proxy.observability.exchange import ExchangeRecord
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests import factories as f
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"


def modes_config(fake_origin: str) -> Config:
    trim = Policy("trim", Chain((ToolResultTruncation(max_tokens=40, keep_recent=0),)))
    routes = tuple(
        Route(mode, "fake", "trim", RouteMatch(headers=(("x-e2e-mode", mode),)), mode=mode)
        for mode in ("shadow", "off")
    )
    return Config(
        source="<e2e modes>",
        server=ServerConfig(),
        upstreams={"fake": UpstreamConfig("fake", fake_origin + "/v1")},
        policies={"trim": trim},
        routes=(*routes, Route("enforce", "fake", "trim")),
    )


@pytest.fixture(scope="module")
def records() -> list[ExchangeRecord]:
    return []


@pytest.fixture(scope="module")
def origin(fake_server: FakeOpenAI, records: list[ExchangeRecord]) -> Iterator[str]:
    app = create_app(modes_config(fake_server.origin), observers=(records.append,))
    with ServerThread(app, **{**uvicorn_options(), "log_level": "warning"}) as server:
        yield server.origin


def record_of(records: list[ExchangeRecord], headers: Mapping[str, str]) -> ExchangeRecord:
    """The exchange's record: observers run just after the response ends, so wait for it."""
    wanted = headers["x-curator-request-id"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [r for r in records if r.id == wanted]
        if found:
            return found[0]
        time.sleep(0.01)
    raise AssertionError(f"no record for request {wanted}")


def messages() -> list[dict[str, object]]:
    return [
        *f.log_read(300),
        f.user("What does it say?"),
    ]


def raw_body(stream: bool = False) -> bytes:
    body = {"model": "gpt-4o", "messages": messages(), "stream": stream, "vendor_x": [1, 2]}
    return orjson.dumps(body).replace(b",", b", ")  # spacing no re-encoding would produce


@pytest.mark.parametrize("mode", ["shadow", "off"])
def test_the_upstream_gets_the_clients_exact_bytes(
    origin: str, fake: FakeOpenAI, records: list[ExchangeRecord], mode: str
) -> None:
    raw = raw_body()
    response = httpx.post(origin + CHAT, content=raw, headers={"x-e2e-mode": mode}, timeout=30)
    assert response.status_code == 200
    assert fake.last.body == raw
    assert response.headers["x-curator-mode"] == mode
    assert record_of(records, response.headers).mode == mode


def test_enforce_on_the_same_request_changes_it(origin: str, fake: FakeOpenAI) -> None:
    raw = raw_body()
    response = httpx.post(origin + CHAT, content=raw, timeout=30)
    assert response.status_code == 200
    assert fake.last.body != raw
    assert "x-curator-mode" not in response.headers


def test_shadow_headers_say_what_enforce_would_have_sent(
    origin: str, fake: FakeOpenAI, records: list[ExchangeRecord]
) -> None:
    client = OpenAI(base_url=origin + "/v1", api_key="sk-e2e", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=messages(),  # type: ignore[arg-type]
        extra_headers={"x-e2e-mode": "shadow"},
    )
    client.close()
    completion = raw.parse()
    assert completion.choices[0].message.content
    assert fake.last.json()["messages"] == messages()  # the model saw the whole history
    before = int(raw.headers["x-curator-tokens-before"])
    after = int(raw.headers["x-curator-tokens-after"])
    assert after < before
    assert raw.headers["x-curator-actions"] == "tool_result_truncation=1"
    record = record_of(records, raw.headers)
    assert (record.tokens_before, record.tokens_after) == (before, after)
    assert record.curated is not None
    assert record.curated[3]["content"] != messages()[3]["content"]


def test_a_shadowed_stream_is_relayed_byte_for_byte(origin: str, fake: FakeOpenAI) -> None:
    raw = raw_body(stream=True)
    headers = {"x-e2e-mode": "shadow"}
    with httpx.stream("POST", origin + CHAT, content=raw, headers=headers, timeout=30) as response:
        received = b"".join(response.iter_raw())
    assert fake.last.body == raw
    assert received == fake.sent[-1]
    assert received.endswith(b"data: [DONE]\n\n")
    assert response.headers["x-curator-mode"] == "shadow"


def test_off_sends_no_curation_headers(origin: str, fake: FakeOpenAI) -> None:
    response = httpx.post(
        origin + CHAT, content=raw_body(), headers={"x-e2e-mode": "off"}, timeout=30
    )
    assert fake.last.body == raw_body()
    names = sorted(h for h in response.headers if h.startswith("x-curator-"))
    assert names == ["x-curator-mode", "x-curator-request-id", "x-curator-route"]
