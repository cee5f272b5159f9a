"""metrics.py and its wiring: what each request adds, /metrics on either listener, workers."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from policies.base import Action
from policies.encoders import Encoder
from policies.errors import ConfigError
from policies.summary_io import SummaryStats
from policies.tokens import TokenCounter
from proxy.config.auth import AuthConfig
from proxy.config.loader import Config, ServerConfig, default_config, load_config
from proxy.config.metrics import MetricsConfig
from proxy.config.render import format_config
from proxy.observability.metrics.families import Metrics
from proxy.observability.metrics.labels import Labels, labels_for
from proxy.observability.metrics.multiproc import MULTIPROC_ENV, forget_dead_workers
from proxy.observability.observers import Observability
from proxy.serving.app import create_app
from proxy.serving.headers import actions_header
from proxy.serving.server import multiprocess_metrics
from tests import factories as f
from tests.proxy.observability.test_observers import (
    answer,
    conversation,
    make_config,
    post,
    record_for,
)

LABELS = Labels(
    routes=frozenset({"chat"}),
    policies=frozenset({"trim"}),
    curators=frozenset({"token_budget", "tool_result_truncation"}),
)


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of an exposition, keyed by name and label set."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def total(text: str, name: str, **labels: str) -> float:
    """The sum of a family's samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples(text).items() if n == name and wanted <= ls)


def observe(metrics: Metrics, **overrides: Any) -> None:
    metrics.observe(record_for(**overrides))


def text_of(metrics: Metrics) -> str:
    return metrics.render()[0].decode()


def test_a_curated_request_counts_tokens_actions_and_savings() -> None:
    metrics = Metrics(LABELS)
    actions = (
        Action("tool_result_truncation", "truncate", (3,), 120, "cut"),
        Action("tool_result_truncation", "truncate", (5,), 80, "cut"),
        Action("token_budget", "drop", (1, 2), 40, "over budget"),
        Action("token_budget", "truncate", (), 0, "could not meet the budget"),
    )
    observe(metrics, actions=actions, tokens_before=900, tokens_after=660, curation_s=0.002)
    text = text_of(metrics)
    assert total(text, "curator_requests_total", route="chat", policy="trim", status="200") == 1
    assert total(text, "curator_tokens_total", stage="before") == 900
    assert total(text, "curator_tokens_total", stage="after") == 660
    # Messages touched, as the x-curator-actions header counts them.
    assert actions_header(actions) == "tool_result_truncation=2,token_budget=2"
    assert total(text, "curator_actions_total", curator="tool_result_truncation") == 2
    assert total(text, "curator_actions_total", curator="token_budget") == 2
    assert total(text, "curator_tokens_saved_total", curator="tool_result_truncation") == 200
    assert total(text, "curator_tokens_saved_total", curator="token_budget") == 40
    assert total(text, "curator_curation_seconds_count", route="chat") == 1


def test_label_values_outside_the_config_become_other() -> None:
    metrics = Metrics(LABELS)
    observe(
        metrics,
        route="rogue",
        policy="made-up",
        skip_reason="some_new_reason",
        actions=(Action("plugin", "drop", (1,), 5, "x"),),
    )
    text = text_of(metrics)
    assert total(text, "curator_requests_total", route="other", policy="other") == 1
    assert total(text, "curator_skipped_total", reason="other") == 1
    assert total(text, "curator_actions_total", route="other", curator="other") == 1
    observe(metrics, skip_reason="invalid_json", route=None, policy=None, status=None)
    text = text_of(metrics)
    assert total(text, "curator_skipped_total", reason="invalid_json") == 1
    assert total(text, "curator_requests_total", route="none", status="ok") == 1


def test_summarizer_spending_and_saving_are_counted() -> None:
    metrics = Metrics(LABELS)
    stats = SummaryStats(calls=3, cache_hits=2, failures=1, prompt_tokens=900, completion_tokens=60)
    stats.tokens_saved = 4000
    observe(metrics, summary=stats)
    text = text_of(metrics)
    tokens, calls = "curator_summarizer_tokens_total", "curator_summarizer_calls_total"
    assert total(text, tokens, route="chat", kind="spent") == 960
    assert total(text, tokens, route="chat", kind="saved") == 4000
    assert total(text, calls, result="ok") == 2
    assert total(text, calls, result="error") == 1
    assert total(text, calls, result="cache_hit") == 2


def test_upstream_errors_are_counted_by_phase() -> None:
    metrics = Metrics(LABELS)
    observe(metrics, status=504, upstream_status=None, error="upstream_timeout")
    observe(metrics, status=200, upstream_status=200, error="upstream_error")
    observe(metrics, status=400, upstream_status=None, error="context_length_exceeded")
    text = text_of(metrics)
    errors = "curator_upstream_errors_total"
    assert total(text, errors, phase="before_response", code="upstream_timeout") == 1
    assert total(text, errors, phase="mid_response", code="upstream_error") == 1
    # The proxy's own answers are not upstream failures.
    assert total(text, errors) == 2


def test_incomplete_responses_are_counted_by_reason() -> None:
    metrics = Metrics(LABELS)
    observe(
        metrics, outcome="upstream_error", error="upstream_timeout", incomplete="upstream_timeout"
    )
    observe(metrics, outcome="client_disconnect", incomplete="client_disconnect")
    observe(metrics, outcome="upstream_error", error="shutdown", incomplete="shutdown")
    observe(metrics, outcome="upstream_error", incomplete="a client-chosen value")
    observe(metrics, status=504, upstream_status=None, error="upstream_timeout")  # complete 504
    text = text_of(metrics)
    name = "curator_responses_incomplete_total"
    for reason in ("upstream_timeout", "client_disconnect", "shutdown", "other"):
        assert total(text, name, route="chat", policy="trim", reason=reason) == 1
    assert total(text, name) == 4


def test_gate_rejections_are_counted_by_reason(tmp_path: Path) -> None:
    limits = dataclasses.replace(ServerConfig().limits, max_body_mb=1)
    config = dataclasses.replace(
        make_config(tmp_path, sink="none"),
        server=dataclasses.replace(ServerConfig(), limits=limits),
        auth=AuthConfig(keys=("proxy-key",)),
    )
    with app_client(config) as client:
        no_key = client.request(**post({"model": "gpt-4o", "messages": [f.user("hi")]}))
        big = client.request(**post(b"x" * (2 << 20), authorization="Bearer proxy-key"))
        scrape = client.get("/metrics", headers={"authorization": "Bearer proxy-key"})
    assert (no_key.status_code, big.status_code) == (401, 413)
    text = scrape.text
    assert total(text, "curator_rejected_total", reason="invalid_proxy_key") == 1
    assert total(text, "curator_rejected_total", reason="request_too_large") == 1
    assert total(text, "curator_rejected_total", reason="proxy_overloaded") == 0


def test_audit_outcomes_and_reloads_are_counted() -> None:
    metrics = Metrics(LABELS)
    metrics.audit_outcome("written", 3)
    metrics.audit_outcome("dropped", 7)
    new_labels = Labels(frozenset({"fresh"}), frozenset(), frozenset())
    metrics.config_reloaded(ok=False)
    metrics.config_reloaded(ok=True, labels=new_labels)
    text = text_of(metrics)
    assert total(text, "curator_audit_records_total", result="written") == 1
    assert total(text, "curator_audit_records_total", result="dropped") == 1
    assert total(text, "curator_audit_queue_depth") == 7
    assert total(text, "curator_config_reloads_total", result="ok") == 1
    assert total(text, "curator_config_reloads_total", result="error") == 1
    assert metrics.labels.route("fresh") == "fresh"
    assert metrics.labels.route("chat") == "other"


def test_a_reload_relabels_the_series_a_route_counts_into() -> None:
    metrics = Metrics(LABELS)
    observe(metrics, route="fresh", tokens_before=10, tokens_after=4)
    metrics.config_reloaded(
        ok=True, labels=Labels(frozenset({"fresh"}), LABELS.policies, frozenset())
    )
    observe(metrics, route="fresh", tokens_before=10, tokens_after=4)
    text = text_of(metrics)
    for route in ("other", "fresh"):
        assert total(text, "curator_requests_total", route=route) == 1
        assert total(text, "curator_tokens_total", route=route, stage="after") == 4
        assert total(text, "curator_upstream_seconds_count", route=route, phase="total") == 1


def test_labels_come_from_the_config(tmp_path: Path) -> None:
    labels = labels_for(make_config(tmp_path))
    assert labels.routes == {"chat", "other"}
    assert labels.policies == {"trim"}
    assert labels.curators == {
        "system_preservation",
        "tool_result_truncation",
        "tool_pair_coherence",
    }


def test_a_tokenizer_fallback_is_counted() -> None:
    metrics = Metrics(LABELS)
    seen = Observability(metrics, None, ())

    def unavailable(name: str) -> Encoder:
        raise OSError(f"no BPE file for {name}")

    counter = TokenCounter(loader=unavailable, on_fallback=seen.tokenizer_fallback)
    assert counter.count_messages([f.user("hello there")], "gpt-4o") > 0
    assert total(text_of(metrics), "curator_tokenizer_fallback_total") == 1


def app_client(config: Config) -> TestClient:
    return TestClient(create_app(config, httpx.MockTransport(answer)))


def test_the_main_listener_serves_metrics_that_add_up(tmp_path: Path) -> None:
    config = make_config(tmp_path, sink="none")
    with app_client(config) as client:
        first = client.request(**post({"model": "gpt-4o", "messages": conversation()}))
        second = client.request(**post({"model": "gpt-4o", "messages": [f.user("hi")]}))
        skipped = client.request(**post(b"[1, 2]"))
        client.get("/v1/models")
        scrape = client.get("/metrics")
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain")
    text = scrape.text
    curated = (first, second)
    assert total(text, "curator_requests_total") == 4
    assert total(text, "curator_requests_total", route="other", policy="none") == 1
    before = sum(int(r.headers["x-curator-tokens-before"]) for r in curated)
    after = sum(int(r.headers["x-curator-tokens-after"]) for r in curated)
    assert total(text, "curator_tokens_total", stage="before") == before
    assert total(text, "curator_tokens_total", stage="after") == after
    touched = int(first.headers["x-curator-actions"].split("=")[1])
    assert total(text, "curator_actions_total", curator="tool_result_truncation") == touched
    assert skipped.headers["x-curator-skipped"] == "not_an_object"
    assert total(text, "curator_skipped_total", reason="not_an_object") == 1
    assert total(text, "curator_inflight_requests") == 0
    assert total(text, "curator_upstream_seconds_count", phase="total") == 4


def test_in_flight_requests_are_counted_while_they_run(tmp_path: Path) -> None:
    seen: list[float | None] = []
    clients: list[TestClient] = []

    def handler(request: httpx.Request) -> httpx.Response:
        metrics: Metrics = clients[0].app_state["edge"].current.metrics
        seen.append(metrics.registry.get_sample_value("curator_inflight_requests"))
        return answer(request)

    app = create_app(make_config(tmp_path, sink="none"), httpx.MockTransport(handler))
    with TestClient(app) as client:
        clients.append(client)
        client.get("/v1/models")
        after = client.get("/metrics").text
    assert seen == [1.0]
    assert total(after, "curator_inflight_requests") == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def with_metrics(config: Config, **settings: Any) -> Config:
    return dataclasses.replace(config, metrics=MetricsConfig(**settings))


def test_an_admin_port_serves_metrics_instead_of_the_main_listener(tmp_path: Path) -> None:
    port = free_port()
    config = with_metrics(make_config(tmp_path, sink="none"), port=port, host="127.0.0.1")
    with app_client(config) as client:
        client.request(**post({"model": "gpt-4o", "messages": [f.user("hi")]}))
        assert client.get("/metrics").status_code == 404
        admin = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert httpx.get(f"http://127.0.0.1:{port}/nothing", timeout=10).status_code == 404
        assert httpx.post(f"http://127.0.0.1:{port}/metrics", timeout=10).status_code == 405
    assert admin.status_code == 200
    assert total(admin.text, "curator_requests_total", route="chat") == 1
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)  # closed at shutdown


def test_metrics_can_be_turned_off(tmp_path: Path) -> None:
    config = with_metrics(make_config(tmp_path, sink="none"), enabled=False)
    with app_client(config) as client:
        assert client.request(**post({"model": "gpt-4o", "messages": [f.user("hi")]})).is_success
        assert client.get("/metrics").status_code == 404
        assert client.app_state["edge"].current.metrics is None


@pytest.fixture
def no_multiproc_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    yield
    os.environ.pop(MULTIPROC_ENV, None)


@pytest.mark.usefixtures("no_multiproc_env")
def test_workers_get_a_fresh_metrics_directory_removed_at_exit(tmp_path: Path) -> None:
    config = make_config(tmp_path, sink="none")
    with multiprocess_metrics(config, 1) as none:
        assert none is None
        assert MULTIPROC_ENV not in os.environ
    with multiprocess_metrics(config, 2) as path:
        assert path is not None
        assert os.environ[MULTIPROC_ENV] == path
        assert os.listdir(path) == []
    assert not os.path.exists(path)


@pytest.mark.usefixtures("no_multiproc_env")
def test_a_configured_metrics_directory_is_emptied_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "prom"
    folder.mkdir()
    (folder / "counter_1234.db").write_bytes(b"stale")
    (folder / "README").write_text("mine")
    config = with_metrics(make_config(tmp_path, sink="none"), multiprocess_dir=str(folder))
    with multiprocess_metrics(config, 3) as path:
        assert path == str(folder)
        assert sorted(os.listdir(folder)) == ["README"]
    assert folder.is_dir()
    off = with_metrics(config, enabled=False, multiprocess_dir=str(folder))
    with multiprocess_metrics(off, 3) as nothing:
        assert nothing is None


def exited_pid() -> int:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True
    )
    return int(child.stdout)


def test_a_dead_workers_live_gauges_are_dropped(tmp_path: Path) -> None:
    dead, alive = exited_pid(), os.getpid()
    names = [
        f"gauge_livesum_{dead}.db",
        f"gauge_livesum_{alive}.db",
        f"counter_{dead}.db",
        f"histogram_{dead}.db",
    ]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    forget_dead_workers(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(names[1:])


def test_the_client_credential_stays_out_of_a_records_repr() -> None:
    record = record_for(authorization="Bearer sk-client-secret-value")
    assert record.authorization == "Bearer sk-client-secret-value"
    assert "sk-client-secret-value" not in repr(record)


MINIMAL = """\
upstreams:
  openai: {base_url: "https://api.openai.com/v1"}
policies:
  off: preset:passthrough
routes:
  - {name: default, upstream: openai, policy: "off"}
"""


def load(folder: Path, extra: str) -> Config:
    path = folder / "config.yaml"
    path.write_text(MINIMAL + extra)
    return load_config(path, environ={})


def problems(folder: Path, extra: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(folder, extra)
    return [str(p).removeprefix(f"{folder}/") for p in info.value.problems]


def test_metrics_and_audit_sections_resolve(tmp_path: Path) -> None:
    config = load(tmp_path, "metrics: {port: 9464, multiprocess_dir: prom}\naudit: {sink: jsonl}\n")
    assert config.metrics == MetricsConfig(port=9464, multiprocess_dir=str(tmp_path / "prom"))
    assert (config.audit.sink, config.audit.path) == (
        "jsonl",
        str(tmp_path / "curator-audit.jsonl"),
    )


def test_without_sections_metrics_are_on_and_audit_is_beside_the_config(tmp_path: Path) -> None:
    config = load(tmp_path, "")
    assert config.metrics == MetricsConfig(enabled=True, path="/metrics", port=None)
    assert (config.audit.sink, config.audit.path) == ("sqlite", str(tmp_path / "curator-audit.db"))


def test_built_in_defaults_audit_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    audit = default_config(environ={}).audit
    assert (audit.sink, audit.path) == ("sqlite", str(tmp_path / "curator-audit.db"))


def test_a_config_built_in_code_does_not_audit() -> None:
    config = Config(source="<code>", server=ServerConfig(), upstreams={}, policies={}, routes=())
    assert not config.audit.enabled
    assert config.metrics.enabled


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("metrics: {path: /v1/metrics}\n", "config.yaml:7: metrics.path: expected a path outside"),
        ("metrics: {path: metrics}\n", "config.yaml:7: metrics.path: expected a URL path"),
        ("metrics: {path: /healthz}\n", "config.yaml:7: metrics.path: expected a path other than"),
        ("metrics: {port: 0}\n", "config.yaml:7: metrics.port: expected an integer from 1 to"),
        ("metrics: {port: 8080}\n", "config.yaml:7: metrics.port: must differ from server.port"),
        ("metrics: {enabled: yes please}\n", "config.yaml:7: metrics.enabled: expected true or"),
        ("metrics: {prot: 1}\n", "config.yaml:7: metrics.prot: unknown key 'prot'; did you mean"),
        (
            "audit: {sink: sqlight}\n",
            "config.yaml:7: audit.sink: expected sqlite | jsonl | postgres | none",
        ),
    ],
)
def test_bad_sections_are_reported_where_they_are(tmp_path: Path, extra: str, problem: str) -> None:
    assert any(p.startswith(problem) for p in problems(tmp_path, extra)), problems(tmp_path, extra)


def test_check_shows_where_audit_records_and_metrics_go(tmp_path: Path) -> None:
    shown = format_config(load(tmp_path, "audit: {store_responses: false}\n"))
    assert f"audit: sqlite {tmp_path / 'curator-audit.db'} (responses not stored;" in shown
    assert "metrics: GET /metrics on the main listener" in shown
    admin = format_config(load(tmp_path, "metrics: {port: 9464}\naudit: {sink: none}\n"))
    assert "metrics: GET /metrics on the admin listener 127.0.0.1:9464" in admin
    assert "audit: off" in admin
