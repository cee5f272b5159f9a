"""Metric cardinality stays bounded whatever clients send: 10k random model names (and
random route, policy, curator and skip-reason strings) leave the scrape's series flat."""

from __future__ import annotations

import itertools
import random
import string
from collections.abc import Iterator

import httpx
import orjson

from policies.base import Action
from proxy.observability.exchange import ExchangeRecord
from proxy.observability.metrics.families import Metrics
from proxy.observability.metrics.labels import labels_for
from proxy.types import Outcome
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.support import CHAT, hardening_config, running_proxy

CONFIG = hardening_config("http://127.0.0.1:9")
STATUSES = (200, 400, 401, 429, 500, 502, 504, None)
OUTCOMES: tuple[Outcome, ...] = ("ok", "upstream_error", "proxy_error", "client_disconnect")


def _noise(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits + "-_.:/", k=16))


def _records(rng: random.Random) -> Iterator[ExchangeRecord]:
    """Endless records: bounded fields cycle through their values, free text is random."""
    known_routes = [r.name for r in CONFIG.routes]
    for i in itertools.count():
        route = known_routes[i % len(known_routes)] if i % 3 else _noise(rng)
        action = Action(_noise(rng) if i % 2 else "token_budget", "drop", (0,), 5, "r")
        yield ExchangeRecord(
            id=str(i),
            started_at=0.0,
            method="POST",
            path=CHAT,
            route=route,
            upstream="fake",
            policy="off" if i % 4 else _noise(rng),
            model=_noise(rng),
            skip_reason=None if i % 5 else _noise(rng),
            body=None,
            original=None,
            curated=None,
            actions=(action,),
            tokens_before=100,
            tokens_after=90,
            curation_s=0.001,
            summary=None,
            status=STATUSES[i % len(STATUSES)],
            upstream_status=200,
            latency_s=0.05,
            ttfb_s=0.01,
            outcome=OUTCOMES[i % len(OUTCOMES)],
        )


def _series(exposition: bytes) -> set[str]:
    """Each sample's name and labels (its value left out)."""
    lines = exposition.decode().splitlines()
    return {line.rsplit(" ", 1)[0] for line in lines if line and not line.startswith("#")}


def test_ten_thousand_random_names_leave_the_series_flat() -> None:
    metrics = Metrics(labels_for(CONFIG))
    records = _records(random.Random(7))
    for record in itertools.islice(records, 200):
        metrics.observe(record)
    warm, _ = metrics.render()
    for record in itertools.islice(records, 10_000):
        metrics.observe(record)
    after, _ = metrics.render()
    assert _series(after) == _series(warm)
    assert len(after) < len(warm) * 1.1  # only the values' digits grew
    assert b"other" in after  # the unknown names were counted, under one label value


def test_random_model_names_through_the_proxy(fake: FakeOpenAI) -> None:
    rng = random.Random(11)
    with (
        running_proxy(hardening_config(fake.origin)) as proxy,
        httpx.Client(base_url=proxy.origin, timeout=30) as http,
    ):

        def send(count: int) -> bytes:
            for _ in range(count):
                body = {"model": _noise(rng), "messages": [{"role": "user", "content": "hi"}]}
                assert http.post(CHAT, content=orjson.dumps(body)).status_code == 200
            return http.get("/metrics").content

        first = send(20)
        later = send(1000)
    assert _series(later) == _series(first)
    assert (
        'curator_requests_total{policy="off",protocol="chat",route="default",status="200"} 1020.0'
        in (later.decode())
    )
    models = {r.model for r in proxy.records if r.model}
    assert len(models) == 1020
    assert not any(model in later.decode() for model in models)
