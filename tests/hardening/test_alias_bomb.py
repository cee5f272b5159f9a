"""A YAML alias bomb ("billion laughs": 560 bytes of nested aliases that expand to 10^9
values) is refused as it expands, with `file:line: key.path: problem`: by `curator check`,
and by a reload of the served config, which keeps serving the running one."""

from __future__ import annotations

import logging
import tracemalloc
from pathlib import Path

import httpx
import pytest

from policies.errors import ConfigError
from policies.yamlsrc import parse
from proxy.cli.main import main
from proxy.config.loader import load_config
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.support import CHAT, chat_body, wait_for

LAUGHS = "\n".join(
    [
        "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]",
        *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)),
    ]
)
"""10^9 values once expanded, in 560 bytes."""
REFUSED = "aliases expand to more than 100000 values (an alias bomb?)"


def test_the_expansion_stops_at_the_bound_with_the_place() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as caught:
            parse(LAUGHS, "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (problem,) = caught.value.problems
    assert str(problem).startswith("bomb.yaml:")
    assert REFUSED in str(problem)
    assert problem.path.startswith("a")
    assert peak < 64 * 1024 * 1024, peak  # was: gigabytes, growing until killed


def test_aliases_within_the_bound_are_expanded() -> None:
    text = "base: &b {x: 1}\n" + "\n".join(f"k{i}: *b" for i in range(1000))
    assert parse(text, "ok.yaml").data["k999"] == {"x": 1}


def test_check_refuses_the_bomb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(LAUGHS + "\n")
    assert main(["check", "--config", str(path)]) == 1
    assert REFUSED in capsys.readouterr().err


def test_a_bomb_saved_over_the_served_config_is_rejected(
    tmp_path: Path, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    path = tmp_path / "config.yaml"
    served = f"""\
upstreams: {{fake: {{base_url: "{fake.origin}/v1"}}}}
policies: {{kept: {{curators: []}}}}
routes: [{{name: default, upstream: fake, policy: kept}}]
audit: {{sink: none}}
"""
    path.write_text(served)
    app = create_app(load_config(path), watch_interval_s=0.05)
    with ServerThread(app, **{**uvicorn_options(), "log_level": "warning"}) as server:
        path.write_text(served + LAUGHS + "\n")
        wait_for(lambda: REFUSED in caplog.text, "the reload's rejection")
        response = httpx.post(server.origin + CHAT, content=chat_body(), timeout=30)
    assert response.status_code == 200
    assert response.headers["x-curator-policy"] == "kept"
    assert "config reload (file change) rejected" in caplog.text
    assert f"{path}:" in caplog.text
