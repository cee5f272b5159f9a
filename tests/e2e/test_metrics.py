"""/metrics scraped from the real proxy after openai-SDK traffic: the numbers add up to what
the response headers said, and every family in deploy/metrics.txt is there."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from bench.conversations import growing_requests
from proxy.config.loader import load_config
from tests.deploy import metric_families
from tests.e2e.test_audit import serving, write_config
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def scrape_when(http: httpx.Client, requests: int, path: str = "/metrics") -> str:
    """A scrape that has seen `requests` requests: the last ones are counted just after
    their responses end (bounded wait; the asserted numbers are exact)."""
    for _ in range(200):
        text = http.get(path).text
        if total(parse(text), "curator_requests_total") >= requests:
            return text
        time.sleep(0.02)
    raise AssertionError(f"the metrics never showed {requests} requests:\n{text}")


def header_counts(values: list[str]) -> dict[str, int]:
    """`x-curator-actions` headers (`curator=n,...`) summed per curator."""
    counts: dict[str, int] = {}
    for value in values:
        for name, n in re.findall(r"(\w+)=(\d+)", value):
            counts[name] = counts.get(name, 0) + int(n)
    return counts


@pytest.fixture
def proxy(tmp_path: Path, fake: FakeOpenAI) -> Iterator[str]:
    path = write_config(tmp_path, fake.origin, audit="{sink: none}")
    with serving(load_config(path)) as origin:
        yield origin


def agent_request(turns: int) -> dict[str, Any]:
    *_, last = growing_requests(seed=11, turns=turns)
    return last


def test_metrics_add_up_to_the_response_headers(proxy: str, fake: FakeOpenAI) -> None:
    client = OpenAI(base_url=proxy + "/v1", api_key="sk-client-e2e", max_retries=0)
    http = httpx.Client(base_url=proxy, timeout=30)
    with client, http:
        create = client.chat.completions.with_raw_response.create
        answers = [
            create(**agent_request(8)),
            create(**{**agent_request(5), "stream": True}),
            create(**agent_request(8), extra_headers={"x-curator-policy": "summary"}),
        ]
        for streamed in answers[1].parse():
            assert streamed.id
        skipped = http.post("/v1/chat/completions", content=b"{oops")
        assert [m.id for m in client.models.list().data] == ["gpt-4o", "gpt-4o-e2e"]
        text = scrape_when(http, 5)
    samples = parse(text)
    headers = [a.headers for a in answers]
    assert total(samples, "curator_requests_total", route="default") == 5
    assert total(samples, "curator_requests_total", status="400") == 1  # the fake's answer
    assert total(samples, "curator_requests_total", policy="summary") == 1
    for stage in ("before", "after"):
        expected = sum(int(h[f"x-curator-tokens-{stage}"]) for h in headers)
        assert total(samples, "curator_tokens_total", stage=stage) == expected
    actions = header_counts([h["x-curator-actions"] for h in headers if "x-curator-actions" in h])
    assert {"tool_result_truncation", "summarizer"} <= set(actions)
    for curator, count in actions.items():
        assert total(samples, "curator_actions_total", curator=curator) == count, curator
    assert total(samples, "curator_tokens_saved_total", curator="summarizer") > 0
    assert skipped.headers["x-curator-skipped"] == "invalid_json"
    assert total(samples, "curator_skipped_total", reason="invalid_json") == 1
    assert total(samples, "curator_curation_seconds_count") == 3
    assert total(samples, "curator_upstream_seconds_count", phase="total") == 5
    assert total(samples, "curator_inflight_requests") == 0

    summary_call = next(r for r in fake.requests if r.json()["model"] == "gpt-4o-mini")
    usage = orjson.loads(fake.sent[fake.requests.index(summary_call)])["usage"]
    spent = usage["prompt_tokens"] + usage["completion_tokens"]
    tokens = "curator_summarizer_tokens_total"
    assert total(samples, tokens, route="default", kind="spent") == spent
    assert total(samples, tokens, kind="saved") > 0
    assert total(samples, "curator_summarizer_calls_total", result="ok") == 1


def test_a_real_scrape_exports_every_listed_family(proxy: str) -> None:
    client = OpenAI(base_url=proxy + "/v1", api_key="sk-client-e2e", max_retries=0)
    with client, httpx.Client(base_url=proxy, timeout=30) as http:
        # Traffic that touches every family: curation with savings, a summary, a skip.
        client.chat.completions.create(**agent_request(8))
        client.chat.completions.create(
            **agent_request(8), extra_headers={"x-curator-policy": "summary"}
        )
        http.post("/v1/chat/completions", content=b"[]")
        text = scrape_when(http, 3)
    exported = {f.name: f for f in text_string_to_metric_families(text)}
    listed = metric_families()
    for name, family in listed.items():
        base = name.removesuffix("_total") if family.type == "counter" else name
        assert base in exported, name
        assert exported[base].type == family.type, name
        for sample in exported[base].samples:
            for label, value in sample.labels.items():
                if label == "le":
                    continue
                assert label in family.labels, f"{name}: {label}"
                allowed = family.labels[label]
                assert allowed is None or value in allowed, f"{name}: {label}={value}"
    # prometheus-client adds a `<name>_created` gauge beside counters and histograms.
    created = {f"{name}_created" for name in exported}
    ours = set(exported) - created
    assert ours == {
        f.name.removesuffix("_total") if f.type == "counter" else f.name for f in listed.values()
    }
