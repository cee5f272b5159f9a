"""The upstream's token usage reaches the exchange record through the request's protocol,
streamed or not, on real sockets: every observed response, audited or not."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.base import Usage
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests import factories as f
from tests.e2e.test_shadow import modes_config, record_of
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def records() -> list[ExchangeRecord]:
    return []


@pytest.fixture(scope="module")
def origin(fake_server: FakeOpenAI, records: list[ExchangeRecord]) -> Iterator[str]:
    app = create_app(modes_config(fake_server.origin), observers=(records.append,))
    with ServerThread(app, **{**uvicorn_options(), "log_level": "warning"}) as server:
        yield server.origin


def _usage(origin: str, records: list[ExchangeRecord], **extra: object) -> Usage | None:
    body = {"model": "gpt-4o", "messages": [f.user("Say hello.")], **extra}
    with httpx.Client(base_url=origin, timeout=10) as client:
        response = client.post(CHAT, json=body)
        assert response.status_code == 200
    return record_of(records, response.headers).usage()


def test_usage_of_a_json_response(origin: str, records: list[ExchangeRecord]) -> None:
    usage = _usage(origin, records)
    assert usage is not None
    assert usage.input_tokens is not None
    assert usage.input_tokens > 0
    assert usage.output_tokens is not None


def test_usage_of_a_stream_that_asks_for_it(origin: str, records: list[ExchangeRecord]) -> None:
    streamed = _usage(origin, records, stream=True, stream_options={"include_usage": True})
    assert streamed == _usage(origin, records)


def test_a_stream_without_usage_has_none(origin: str, records: list[ExchangeRecord]) -> None:
    assert _usage(origin, records, stream=True) is None
