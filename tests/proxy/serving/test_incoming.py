"""Reading what a client sent: the bounded body, the credential, header lookups, `model`."""

from __future__ import annotations

import pytest

from proxy.errors import ProxyError
from proxy.serving.incoming import (
    ClientGone,
    client_credential,
    has_header,
    header_map,
    read_body,
    sniff_model,
)
from proxy.types import Message, Receive


def receiver(*messages: Message) -> Receive:
    queue = list(messages)

    async def receive() -> Message:
        return queue.pop(0)

    return receive


@pytest.mark.anyio
async def test_a_chunked_body_is_joined() -> None:
    receive = receiver(
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": False},
    )
    assert await read_body(receive, 10) == b"abcd"


@pytest.mark.anyio
async def test_a_body_over_the_limit_is_a_413_before_the_rest_is_read() -> None:
    receive = receiver({"type": "http.request", "body": b"x" * 11, "more_body": True})
    with pytest.raises(ProxyError) as err:
        await read_body(receive, 10)
    assert (err.value.status, err.value.code) == (413, "request_too_large")


@pytest.mark.anyio
async def test_a_client_that_leaves_mid_body_is_noticed() -> None:
    receive = receiver(
        {"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.disconnect"}
    )
    with pytest.raises(ClientGone):
        await read_body(receive, 10)


def test_the_credential_is_authorization_or_azures_api_key() -> None:
    assert client_credential([(b"authorization", b"Bearer sk-1")]) == "Bearer sk-1"
    assert client_credential([(b"api-key", b"az-1")]) == "az-1"
    both = [(b"api-key", b"az-1"), (b"authorization", b"Bearer sk-1")]
    assert client_credential(both) == "Bearer sk-1"
    assert client_credential([(b"x-other", b"v")]) is None


def test_headers_by_name() -> None:
    raw = [(b"X-Team", b"agents"), (b"x-curator-policy", b"off")]
    assert header_map(raw) == {"x-team": "agents", "x-curator-policy": "off"}
    assert has_header(raw, b"x-curator-policy")
    assert not has_header(raw, b"authorization")


@pytest.mark.parametrize(
    ("body", "model"),
    [
        (b'{"model": "text-embedding-3-small", "input": "x"}', "text-embedding-3-small"),
        (b'  {"model": 3}', None),
        (b"[1, 2]", None),
        (b"{not json", None),
        (b"", None),
    ],
)
def test_the_model_is_sniffed_from_a_json_object(body: bytes, model: str | None) -> None:
    assert sniff_model(body) == model


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
