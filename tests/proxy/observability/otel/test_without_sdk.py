"""Off, OpenTelemetry costs nothing and needs nothing: a proxy whose interpreter cannot import
`opentelemetry` at all serves as before, never tries to, and sends the client's trace
context upstream untouched; `otel.enabled: true` there is a config problem naming the extra.
With otel on, the upstream gets the proxy's own span as the parent instead."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from proxy.config.loader import load_config
from proxy.serving.app import create_app
from tests.proxy.config.configs import MINIMAL, write

ROOT = Path(__file__).resolve().parents[4]
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SCRIPT = textwrap.dedent(
    """
    import sys
    from importlib.abc import MetaPathFinder

    class NoOtel(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("opentelemetry", "grpc"):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, NoOtel())

    import httpx
    from starlette.testclient import TestClient
    from policies.errors import ConfigError
    from proxy.config.loader import load_config
    from proxy.serving.app import create_app

    seen = []
    def answer(request):
        if request.url.path.endswith("/chat/completions"):
            seen.append(request.headers.get("traceparent"))
        return httpx.Response(200, json={"choices": [], "usage": {"prompt_tokens": 1}})

    config = load_config(sys.argv[1], environ={})
    with TestClient(create_app(config, httpx.MockTransport(answer))) as client:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        sent = client.post("/v1/chat/completions", json=body, headers={"traceparent": sys.argv[3]})
    assert sent.status_code == 200, sent.text
    assert seen == [sys.argv[3]], seen
    assert not [m for m in sys.modules if m.startswith(("opentelemetry", "grpc"))]
    try:
        load_config(sys.argv[2], environ={})
    except ConfigError as exc:
        print(exc)
    """
)


def test_the_proxy_serves_without_the_sdk(tmp_path: Path) -> None:
    off = write(tmp_path, MINIMAL + "audit: {sink: none}\n", "off.yaml")
    on = write(tmp_path, MINIMAL + "otel: {enabled: true}\n", "on.yaml")
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(off), str(on), TRACEPARENT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert "otel.enabled: needs the OpenTelemetry SDK" in ran.stdout
    assert "pip install 'context-curator[otel]'" in ran.stdout


def test_on_the_upstream_gets_the_proxys_span_in_the_clients_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the last export, at shutdown, fails
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chat/completions"):
            seen.append(request.headers.get("traceparent"))
        return httpx.Response(200, json={"choices": []})

    # A collector nobody runs; metrics off, so only the one span's export fails at shutdown.
    otel = "{enabled: true, endpoint: 'http://127.0.0.1:9', metrics: false}"
    text = MINIMAL + f"audit: {{sink: none}}\notel: {otel}\n"
    config = load_config(write(tmp_path, text), environ={})
    with TestClient(create_app(config, httpx.MockTransport(answer))) as client:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        headers = {"traceparent": TRACEPARENT}
        assert client.post("/v1/chat/completions", json=body, headers=headers).status_code == 200
    (sent,) = seen
    assert sent is not None
    version, trace, span, flags = sent.split("-")
    assert (version, trace, flags) == ("00", TRACEPARENT.split("-")[1], "01")
    assert span != TRACEPARENT.split("-")[2]
