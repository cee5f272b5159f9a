"""The fake upstream's scripted replies go to the requests they are for: a proxy's own
background `GET /models` as it starts must not take the reply a test scripted next."""

from __future__ import annotations

from starlette.testclient import TestClient

from tests.fakes.upstream import Behavior, FakeOpenAI

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def test_a_model_listing_leaves_a_scripted_reply_for_the_request_it_is_for() -> None:
    fake = FakeOpenAI(windows={"gpt-4o": 128_000})
    fake.queue(Behavior(status=503, body=b"{}"))
    with TestClient(fake.app) as client:
        assert client.get("/v1/models").status_code == 200  # the proxy starting, say
        assert client.post("/v1/chat/completions", json=CHAT).status_code == 503


def test_a_reply_scripted_for_a_listing_answers_only_a_listing() -> None:
    fake = FakeOpenAI(windows={"gpt-4o": 128_000})
    fake.queue(Behavior(status=503, body=b"{}", listing=True))
    with TestClient(fake.app) as client:
        assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
        assert client.get("/v1/models").status_code == 503
