"""Spend truth through the real proxy: an agent conversation against a fake upstream that
models prompt caching (cached tokens when a prefix of >= 1,024 tokens repeats, in 128-token
steps). The proxy's metrics and audit report the upstream's usage and the money; its online
counterfactual matches `curator simulate` of the audit export; and simulating the export
with the same policy reproduces every request's curated token count exactly, although the
simulating config knows neither the model's window nor the client's output limit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.conversations import growing_requests
from policies.prefix_cache import PrefixCache
from policies.pricing import Price, Usage, cost
from policies.summary_cache import MEMORY, MemoryCache
from policies.summary_io import Services
from proxy.cli.simulate import Options, placeholder_complete, simulate
from proxy.cli.simulate_input import read_requests
from proxy.cli.simulate_model import Report
from proxy.config.loader import load_config
from proxy.observability.audit.readers.query import record_conversation
from proxy.observability.audit.readers.sqlite import SqliteReader
from tests.e2e.test_audit import serving, wait_for_records
from tests.fakes.caching import PromptCache
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

MODEL = "gpt-4o-spend"
WINDOW = 9_000
OUTPUT_LIMIT = 1_500
"""Not the 4,096 a simulation assumes without the record: the budget differs with it."""
PRICE = Price(input=2.0, cached_input=0.5, output=8.0)
TURNS = 14


def config_text(upstream: str, *, window: bool) -> str:
    models = f'models:\n  "{MODEL}": {{context_window: {WINDOW}}}\n' if window else ""
    return f"""
upstreams:
  fake: {{base_url: "{upstream}/v1", read_timeout_s: 30}}
{models}policies:
  agent:
    curators:
      - system_preservation: {{pin_first_user: true}}
      - tool_result_truncation: {{max_tokens: 400, keep_recent: 2}}
      - token_budget: {{}}
      - tool_pair_coherence: {{}}
routes:
  - {{name: default, upstream: fake, policy: agent}}
audit: {{path: audit.db}}
prices:
  "{MODEL}*": {{input: {PRICE.input}, cached_input: {PRICE.cached_input}, output: {PRICE.output}}}
"""


@pytest.fixture(scope="module")
def caching_fake() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(windows={MODEL: WINDOW}, cache=PromptCache())
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


def conversation() -> list[dict[str, Any]]:
    bodies = []
    for i, body in enumerate(growing_requests(11, TURNS, MODEL, stream=False)):
        body = {**body, "max_completion_tokens": OUTPUT_LIMIT}
        if i % 2:  # every other turn streams, usage in its last chunk
            body.update(stream=True, stream_options={"include_usage": True})
        bodies.append(body)
    return bodies


def scrape(origin: str) -> dict[tuple[str, str], float]:
    """(family, kind) -> value summed over the other labels, for the spend families."""
    text = httpx.get(origin + "/metrics").text
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("curator_upstream_tokens_total", "curator_cost_usd_total"):
                key = (sample.name, sample.labels["kind"])
                found[key] = found.get(key, 0.0) + sample.value
    return found


def scrape_settled(origin: str, records: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """A scrape once the spend thread has counted every uncurated cost the records hold (it
    runs a moment after each response; bounded: the values are what the tests assert)."""
    expected = sum(r["cost"]["uncurated_usd"] for r in records)
    for _ in range(200):
        metrics = scrape(origin)
        if metrics.get(("curator_cost_usd_total", "uncurated")) == pytest.approx(expected):
            break
        time.sleep(0.025)
    return metrics


@pytest.fixture(scope="module")
def run(caching_fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Drive the conversation once; the tests read what the proxy reported."""
    folder = tmp_path_factory.mktemp("spend")
    (folder / "config.yaml").write_text(config_text(caching_fake.origin, window=True))
    ids, usages = [], []
    with serving(load_config(folder / "config.yaml")) as origin:
        with httpx.Client(base_url=origin, timeout=30) as client:
            for body in conversation():
                response = client.post("/v1/chat/completions", json=body)
                assert response.status_code == 200, response.text
                ids.append(response.headers["x-curator-request-id"])
            usages = [_fake_usage(sent) for sent in caching_fake.sent]
        wait_for_records(folder / "audit.db", ids)
        reader = SqliteReader(str(folder / "audit.db"))
        try:
            records = [reader.get(rid) for rid in ids]
        finally:
            reader.close()
        metrics = scrape_settled(origin, records)
    return {"folder": folder, "records": records, "metrics": metrics, "usages": usages}


def _fake_usage(sent: bytes) -> dict[str, Any]:
    """The usage the fake reported, from the body (or the stream) it sent."""
    if sent.startswith(b"data:"):
        events = [line[6:] for line in sent.split(b"\n") if line.startswith(b"data: {")]
        usage: dict[str, Any] = orjson.loads(events[-1])["usage"]
        return usage
    answer: dict[str, Any] = orjson.loads(sent)["usage"]
    return answer


def test_usage_is_the_upstreams_streamed_or_not(run: dict[str, Any]) -> None:
    records, usages = run["records"], run["usages"]
    assert len(records) == len(usages) == TURNS
    for record, usage in zip(records, usages, strict=True):
        assert record["usage"] == {
            "input": usage["prompt_tokens"],
            "cached": usage["prompt_tokens_details"]["cached_tokens"],
            "output": usage["completion_tokens"],
            "reasoning": 0,
            "cache_write": 0,  # the fake reports none (OpenAI's models before writes)
            "cache_write_1h": 0,
        }
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    assert cached > 0, "the conversation outgrew 1,024 tokens: later turns hit the cache"
    metrics = run["metrics"]
    assert metrics[("curator_upstream_tokens_total", "cached")] == cached
    assert metrics[("curator_upstream_tokens_total", "input")] == sum(
        u["prompt_tokens"] for u in usages
    )


def test_actual_cost_is_the_usage_at_the_configured_prices(run: dict[str, Any]) -> None:
    ours = 0.0
    for record, usage in zip(run["records"], run["usages"], strict=True):
        paid = Usage(
            usage["prompt_tokens"],
            usage["prompt_tokens_details"]["cached_tokens"],
            usage["completion_tokens"],
        )
        ours += cost(paid, PRICE)
        assert record["cost"]["actual_usd"] == pytest.approx(cost(paid, PRICE))
        assert record["cost"]["price"] == f"{MODEL}*"
    assert run["metrics"][("curator_cost_usd_total", "actual")] == pytest.approx(ours)


def test_records_keep_what_decides_the_budget(run: dict[str, Any]) -> None:
    records = run["records"]
    assert {r["max_completion_tokens"] for r in records} == {OUTPUT_LIMIT}
    assert {r["context_window"] for r in records} == {WINDOW}
    assert {r["encoding"] for r in records} == {"o200k_base"}
    assert all(r["tools"] and r["tools_digest"] for r in records)
    assert len({r["conversation"] for r in records}) == 1, "one conversation, one key"
    assert records[0]["conversation"] == record_conversation(records[0]), "the viewer's key"


def simulated(run: dict[str, Any], folder: Path) -> Any:
    """`curator simulate` of the audit export, under a config without the `models:` window."""
    (folder / "bare.yaml").write_text(config_text("http://127.0.0.1:9", window=False))
    config = load_config(folder / "bare.yaml")
    export = "\n".join(orjson.dumps(r).decode() for r in run["records"])
    requests = read_requests("export.jsonl", export)
    services = Services(complete=placeholder_complete, caches={MEMORY: MemoryCache()})
    options = Options(input="export.jsonl", policy="agent", cached_price=0.25)
    report = Report(PrefixCache(cached_price=0.25))
    with asyncio.Runner() as runner:
        priced = list(simulate(config, options, requests, services, runner))
    for item in priced:
        report.add(item)
    return SimpleNamespace(outcomes=[p.outcome for p in priced], original=report.original)


def test_simulating_the_export_reproduces_every_curated_count(run: dict[str, Any]) -> None:
    report = simulated(run, run["folder"])
    records = run["records"]
    assert any(r["tokens_after"] < r["tokens_before"] for r in records), "curation cut"
    for record, outcome in zip(records, report.outcomes, strict=True):
        assert outcome.result is not None
        assert outcome.tokens_before == record["tokens_before"]
        assert outcome.result.tokens_after == record["tokens_after"], record["id"]


def test_online_counterfactual_matches_the_offline_simulation(run: dict[str, Any]) -> None:
    report = simulated(run, run["folder"])
    records = run["records"]
    online = sum(r["cost"]["uncurated_usd"] for r in records)
    # simulate prices input in units of one uncached token (cached = 0.25 of one, as here).
    output = sum(r["usage"]["output"] for r in records)
    offline = (report.original.cost * PRICE.input + output * PRICE.output) / 1_000_000
    assert online == pytest.approx(offline, rel=0.01)
    assert sum(r["cost"]["uncurated"]["cached"] for r in records) == report.original.cached_tokens
    assert run["metrics"][("curator_cost_usd_total", "uncurated")] == pytest.approx(online)
