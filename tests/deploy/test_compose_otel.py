"""docker-compose.otel.yml, the OpenTelemetry override: merged onto docker-compose.yml it is
valid against the Compose Specification, it points the proxy at the collector it starts, and
the collector's config receives OTLP where the proxy sends it and pipes both signals."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit

from proxy.config.loader import load_config
from tests.deploy import DEPLOY, compose, load_yaml, mounts
from tests.deploy.test_compose import validate

OVERRIDE = DEPLOY / "docker-compose.otel.yml"
COLLECTOR = DEPLOY / "otel-collector.yaml"


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Compose's merge of an override file, for mappings (lists here are not overridden)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merged() -> dict[str, Any]:
    return merge(compose(), load_yaml(OVERRIDE))


def test_the_merged_file_matches_the_compose_spec() -> None:
    validate(merged())
    assert set(merged()["services"]) == {
        "curator",
        "prometheus",
        "grafana",
        "postgres",
        "otel-collector",
    }


def test_the_proxy_sends_to_the_collector_it_starts() -> None:
    services = merged()["services"]
    env = services["curator"]["environment"]
    endpoint = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.hostname == "otel-collector"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert services["curator"]["depends_on"]["otel-collector"] == {"condition": "service_started"}
    http = load_yaml(COLLECTOR)["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert http.rsplit(":", 1)[1] == str(endpoint.port)
    assert "ports" not in services["otel-collector"]  # only the compose network reaches it


def test_the_collector_config_is_mounted_and_pipes_both_signals() -> None:
    collector = merged()["services"]["otel-collector"]
    source, read_only = mounts(collector)["/etc/otelcol-contrib/config.yaml"]
    assert (DEPLOY / source).resolve() == COLLECTOR.resolve()
    assert read_only
    config = load_yaml(COLLECTOR)
    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces", "metrics"}
    for pipeline in pipelines.values():
        assert pipeline["receivers"] == ["otlp"]
        assert set(pipeline["exporters"]) <= set(config["exporters"])
        assert set(pipeline["processors"]) <= set(config["processors"])


def test_the_docker_config_turns_otel_on_only_when_told() -> None:
    env = {"CURATOR_PROXY_KEY": "k", "CURATOR_UPSTREAM": "https://api.openai.com/v1"}
    off = load_config(DEPLOY / "config.docker.yaml", environ=env)
    assert off.otel.enabled is False
    told = merged()["services"]["curator"]["environment"]["CURATOR_OTEL"]
    on = load_config(DEPLOY / "config.docker.yaml", environ={**env, "CURATOR_OTEL": told})
    assert on.otel.enabled is True
