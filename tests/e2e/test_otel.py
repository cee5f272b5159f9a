"""OpenTelemetry read from outside: openai-SDK traffic through the real proxy, the spans and
GenAI metrics it exports decoded by our own OTLP receivers on loopback (tests/fakes/otlp.py).

A chat, a Responses and a summarized request each give a GenAI span parented under the
client's trace, a `curate` child with the proxy's attributes, and under it the summarizer's
own GenAI span; the upstream request carries the proxy's span on. With the collector down
or stalled, every request is still served and the drops are counted on /metrics.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from bench.conversations import growing_requests
from proxy.config.loader import load_config
from tests.e2e.test_audit import serving
from tests.e2e.test_metrics import parse, total
from tests.fakes.otlp import GrpcReceiver, HttpReceiver, Received, ReceivedSpan
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_METRIC_EXPORT_INTERVAL": "200"}


def write_config(folder: Path, upstream: str, otel: str) -> Path:
    path = folder / "config.yaml"
    path.write_text(
        f"""
upstreams:
  fake: {{base_url: "{upstream}/v1", read_timeout_s: 30}}
policies:
  agent:
    curators:
      - system_preservation: {{pin_first_user: true}}
      - tool_result_truncation: {{max_tokens: 400, keep_recent: 2}}
      - token_budget: {{}}
      - tool_pair_coherence: {{}}
  summary:
    curators:
      - summarizer: {{upstream: fake, model: gpt-4o-mini, trigger_tokens: 800}}
      - tool_pair_coherence: {{}}
routes:
  - {{name: default, upstream: fake, policy: agent, allow_policy_header: true}}
audit: {{sink: none}}
otel: {otel}
"""
    )
    return path


@pytest.fixture(autouse=True)
def fast_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches every 50 ms and metrics every 200 ms, so the receiver sees them at once."""
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    for name, value in FAST_EXPORT.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with HttpReceiver() as server:
        yield server


def agent_request(turns: int) -> dict[str, object]:
    *_, last = growing_requests(seed=11, turns=turns)
    return last


def client_for(origin: str) -> OpenAI:
    return OpenAI(
        base_url=origin + "/v1",
        api_key="sk-client-e2e",
        max_retries=0,
        default_headers={"traceparent": TRACEPARENT, "tracestate": "vendor=abc"},
    )


def children(received: Received, parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in received.spans if s.parent_span_id == parent.span_id]


def request_spans(received: Received) -> list[ReceivedSpan]:
    return [s for s in received.spans if s.parent_span_id == CLIENT_SPAN]


def test_chat_responses_and_summary_spans_under_the_clients_trace(
    tmp_path: Path, fake: FakeOpenAI, receiver: HttpReceiver
) -> None:
    otel = f'{{enabled: true, endpoint: "{receiver.endpoint}", service_name: curator-e2e}}'
    with serving(load_config(write_config(tmp_path, fake.origin, otel))) as origin:
        with client_for(origin) as client:
            chat = client.chat.completions.create(**agent_request(8))
            client.responses.create(model="gpt-4o", input="Status?")
            summarized = client.chat.completions.create(
                **{**agent_request(8), "stream": True, "stream_options": {"include_usage": True}},
                extra_headers={"x-curator-policy": "summary"},
            )
            streamed = list(summarized)
        received = receiver.received
        received.wait_for(lambda r: len([s for s in r.spans if s.name == "curate"]) == 3)
        received.wait_for(lambda r: {"gen_ai.client.token.usage"} <= {m.name for m in r.metrics})
    spans = request_spans(received)
    assert len(spans) == 3
    assert {s.trace_id for s in received.spans} == {CLIENT_TRACE}
    assert all(s.resource["service.name"] == "curator-e2e" for s in received.spans)
    chats = [s for s in spans if s.attributes["curator.path"] == "/v1/chat/completions"]
    (chat_span,) = [s for s in chats if "gen_ai.request.stream" not in s.attributes]
    (summary_span,) = [s for s in chats if s is not chat_span]
    (responses_span,) = [s for s in spans if s.attributes["curator.path"] == "/v1/responses"]
    assert chat_span.name == f"chat {agent_request(8)['model']}"
    assert chat_span.kind == 3  # SPAN_KIND_CLIENT
    assert chat_span.attributes["gen_ai.operation.name"] == "chat"
    assert chat_span.attributes["gen_ai.request.model"] == agent_request(8)["model"]
    assert chat_span.attributes["gen_ai.response.model"] == chat.model
    assert chat_span.attributes["gen_ai.response.id"] == chat.id
    assert chat.usage is not None
    assert chat_span.attributes["gen_ai.usage.input_tokens"] == chat.usage.prompt_tokens
    assert chat_span.attributes["gen_ai.usage.output_tokens"] == chat.usage.completion_tokens
    assert chat_span.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert chat_span.attributes["server.address"] == "127.0.0.1"
    assert chat_span.attributes["http.response.status_code"] == 200
    assert "gen_ai.input.messages" not in chat_span.attributes  # content is opt-in
    assert "error.type" not in chat_span.attributes

    (curate,) = children(received, chat_span)
    assert curate.name == "curate"
    assert curate.attributes["curator.route"] == "default"
    assert curate.attributes["curator.policy"] == "agent"
    assert curate.attributes["curator.mode"] == "enforce"
    assert curate.attributes["curator.tokens_after"] <= curate.attributes["curator.tokens_before"]
    assert chat_span.start_ns <= curate.start_ns <= curate.end_ns <= chat_span.end_ns

    assert responses_span.attributes["gen_ai.operation.name"] == "chat"
    assert responses_span.attributes["gen_ai.response.id"].startswith("resp_")
    assert responses_span.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert responses_span.attributes["gen_ai.usage.input_tokens"] > 0
    assert children(received, responses_span)[0].attributes["curator.protocol"] == "responses"

    assert summary_span.attributes["gen_ai.request.stream"] is True
    assert streamed[-1].usage is not None
    assert (
        summary_span.attributes["gen_ai.usage.output_tokens"]
        == streamed[-1].usage.completion_tokens
    )
    (summary_curate,) = children(received, summary_span)
    assert summary_curate.attributes["curator.policy"] == "summary"
    assert "summarizer" in summary_curate.attributes["curator.actions.curators"]
    (call,) = children(received, summary_curate)
    assert call.name == "chat gpt-4o-mini"
    assert call.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert call.attributes["gen_ai.usage.output_tokens"] > 0

    # The upstream saw the proxy's span as the parent, in the client's trace.
    chat_call = next(r for r in fake.requests if r.path == "/v1/chat/completions")
    assert chat_call.header("traceparent") == f"00-{CLIENT_TRACE}-{chat_span.span_id}-01"
    assert chat_call.header("tracestate") == "vendor=abc"

    names = {m.name for m in received.metrics}
    assert {
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.time_to_first_chunk",
    } <= names
    types = {m.attributes.get("gen_ai.token.type") for m in received.metrics if m.unit == "{token}"}
    assert types == {"input", "output"}


def test_content_is_exported_redacted_when_opted_in(
    tmp_path: Path, fake: FakeOpenAI, receiver: HttpReceiver
) -> None:
    secret = "sk-proj-" + "Zq7" * 12
    otel = f'{{enabled: true, endpoint: "{receiver.endpoint}", capture_content: true}}'
    with serving(load_config(write_config(tmp_path, fake.origin, otel))) as origin:
        with client_for(origin) as client:
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": f"my key is {secret}"}]
            )
        receiver.received.wait_for(lambda r: len(request_spans(r)) == 1)
    (span,) = request_spans(receiver.received)
    content = span.attributes["gen_ai.input.messages"]
    assert "my key is [REDACTED:openai_key]" in content
    assert secret not in content
    assert '"parts"' in content


@pytest.mark.skipif(importlib.util.find_spec("grpc") is None, reason="grpcio not installed")
def test_grpc_export(tmp_path: Path, fake: FakeOpenAI) -> None:
    with GrpcReceiver() as receiver:
        otel = f'{{enabled: true, endpoint: "{receiver.endpoint}", protocol: grpc}}'
        with serving(load_config(write_config(tmp_path, fake.origin, otel))) as origin:
            with client_for(origin) as client:
                client.chat.completions.create(**agent_request(3))
            receiver.received.wait_for(lambda r: len(r.spans) == 2)
            receiver.received.wait_for(lambda r: len(r.metrics) > 0)
    (span,) = request_spans(receiver.received)
    assert span.attributes["gen_ai.operation.name"] == "chat"
    assert children(receiver.received, span)[0].name == "curate"


def test_a_stalled_collector_neither_blocks_serving_nor_loses_spans_silently(
    tmp_path: Path, fake: FakeOpenAI, receiver: HttpReceiver
) -> None:
    receiver.hold.clear()  # every export hangs until the end of the test
    otel = f'{{enabled: true, endpoint: "{receiver.endpoint}", max_queue_size: 4}}'
    with serving(load_config(write_config(tmp_path, fake.origin, otel))) as origin:
        with client_for(origin) as client, httpx.Client(base_url=origin) as http:
            for _ in range(12):  # 24 spans for a queue of 4, while the collector hangs
                client.chat.completions.create(**agent_request(2))
            samples = parse(http.get("/metrics").text)
        assert receiver.received.spans == []
        receiver.hold.set()
    dropped = "curator_otel_dropped_total"
    assert total(samples, dropped, signal="spans", reason="queue_full") >= 24 - 4 - 4
    assert total(samples, "curator_requests_total", status="200") == 12


def test_a_dead_collector_counts_failed_exports(
    tmp_path: Path, fake: FakeOpenAI, dead_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    failed = {"signal": "spans", "reason": "export_failed"}
    otel = f'{{enabled: true, endpoint: "http://127.0.0.1:{dead_port}"}}'
    config = load_config(write_config(tmp_path, fake.origin, otel))
    with (
        serving(config) as origin,
        client_for(origin) as client,
        httpx.Client(base_url=origin) as http,
    ):
        for _ in range(3):
            client.chat.completions.create(**agent_request(2))
        for _ in range(250):  # bounded: the exporter gives up after its 1 s timeout
            samples = parse(http.get("/metrics").text)
            spans_lost = total(samples, "curator_otel_dropped_total", **failed)
            if spans_lost >= 6 and total(samples, "curator_otel_dropped_total") > 6:
                break
            time.sleep(0.02)
    assert total(samples, "curator_otel_dropped_total", **failed) == 6
    assert total(samples, "curator_otel_dropped_total", signal="metrics") >= 1
    assert total(samples, "curator_requests_total", status="200") == 3
