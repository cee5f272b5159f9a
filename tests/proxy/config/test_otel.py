"""The `otel:` section (otel.py): off by default; keys validated at load with their path; on
without the SDK installed is a problem `curator check` names."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from proxy.config import otel as otel_config
from tests.proxy.config.configs import MINIMAL, assert_one_problem, load, problems


def test_off_by_default(tmp_path: Path) -> None:
    config = load(tmp_path, MINIMAL).otel
    assert config.enabled is False
    assert (config.endpoint, config.protocol, config.service_name) == (None, None, None)
    assert (config.traces, config.metrics, config.capture_content) == (True, True, False)


def test_every_key_is_read(tmp_path: Path) -> None:
    text = MINIMAL + (
        "otel: {enabled: true, service_name: edge, endpoint: 'http://collector:4318',"
        " protocol: grpc, headers: {X-Key: '${KEY}'}, traces: false, metrics: true,"
        " capture_content: true, max_queue_size: 64}\n"
    )
    config = load(tmp_path, text, {"KEY": "k1"}).otel
    assert (config.enabled, config.capture_content, config.traces) == (True, True, False)
    assert (config.service_name, config.endpoint, config.protocol) == (
        "edge",
        "http://collector:4318",
        "grpc",
    )
    assert dict(config.headers) == {"x-key": "k1"}
    assert config.max_queue_size == 64


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("{protocol: http/json}", "otel.protocol: expected http/protobuf | grpc"),
        ("{endpoint: collector:4318}", "otel.endpoint: expected a URL"),
        ("{max_queue_size: 0}", "otel.max_queue_size: expected an integer >= 1"),
        ("{headers: [a]}", "otel.headers: expected a mapping"),
        ("{headers: {a: [1]}}", "otel.headers.a: expected a text value"),
        ("{enabled: 'yes'}", "otel.enabled: expected true or false"),
        ("{endpoints: x}", "otel.endpoints: unknown key 'endpoints'"),
    ],
)
def test_problems_name_their_key(tmp_path: Path, section: str, expected: str) -> None:
    assert_one_problem(tmp_path, MINIMAL + f"otel: {section}\n", f"config.yaml:7: {expected}")


def test_on_without_the_sdk_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def missing(name: str, *args: object) -> object:
        return None if name.startswith("opentelemetry") else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(otel_config.importlib.util, "find_spec", missing)
    found = problems(tmp_path, MINIMAL + "otel: {enabled: true}\n")
    assert found == [
        "config.yaml:7: otel.enabled: needs the OpenTelemetry SDK, which is not installed: "
        "pip install 'context-curator[otel]'"
    ]
    assert load(tmp_path, MINIMAL + "otel: {enabled: false}\n").otel.enabled is False
