"""README.md's client recipes, run as a newcomer would copy them: the proxy built from the
README's own config block (its upstream pointed at a strict fake on loopback), the recipe's
code run with only the proxy's address changed, and its proof step checked (the
`x-curator-*` headers it prints, `curator audit list`). The Codex recipe is a config file:
it must parse and name the proxy as its model provider."""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from proxy.cli.main import main
from proxy.config.loader import load_config
from proxy.serving.app import create_app
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
PROXY = "http://127.0.0.1:8080"
"""The address every recipe gives; each run replaces it with the test proxy's."""


def recipe(heading: str, lang: str) -> str:
    """The first ```lang block under README's `### heading`."""
    section = README.split(f"\n### {heading}\n", 1)[1].split("\n## ", 1)[0]
    section = section.split("\n### ", 1)[0]
    match = re.search(rf"^```{lang}\n(.*?)^```", section, flags=re.DOTALL | re.MULTILINE)
    assert match, f"README's {heading!r} recipe has no {lang} block"
    return match.group(1)


def goal_config(goal: str) -> dict[str, Any]:
    """The yaml block README gives right after `<goal>:` in "Pick your goal"."""
    match = re.search(rf"^{goal}:\n\n```yaml\n(.*?)^```", README, flags=re.DOTALL | re.MULTILINE)
    assert match, f"README gives no config for {goal!r}"
    data = yaml.safe_load(match.group(1))
    assert isinstance(data, dict)
    return data


def serve(config: dict[str, Any], folder: Path) -> ServerThread:
    """The proxy as `curator serve --config` would build it from `config`."""
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    app = create_app(load_config(path), watch_interval_s=None)
    return ServerThread(app)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the default audit log, ./curator-audit.db, lands here
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-recipe")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme-recipe")
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "CURATOR_UPSTREAM"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def openai_proxy(folder: Path) -> Iterator[str]:
    """The proxy on the README's "save money on agents" config, upstream: the fake."""
    with ServerThread(FakeOpenAI(windows={"gpt-4o-mini": 128_000}).app) as fake:
        config = goal_config("Save money on agents")
        config["upstreams"]["openai"]["base_url"] = f"{fake.origin}/v1"
        with serve(config, folder) as proxy:
            yield proxy.origin


def run(code: str, origin: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert PROXY in code
    exec(compile(code.replace(PROXY, origin), "README.md", "exec"), {})
    return capsys.readouterr().out


def audit_list(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The recipes' other proof: `curator audit list`, after the proxy has stopped."""
    assert main(["audit", "list", "--config", str(folder / "config.yaml")]) == 0
    return capsys.readouterr().out


def test_the_openai_sdk_recipe_goes_through_the_proxy(
    openai_proxy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(recipe("openai SDK", "python"), openai_proxy, capsys)
    reply, proof = out.strip().splitlines()[-2:]
    assert reply
    route, before, after, _actions = proof.split(" ", 3)
    assert route == "all"
    assert int(before) >= int(after) > 0


def test_the_audit_list_proof_shows_the_recipes_request(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ServerThread(FakeOpenAI(windows={"gpt-4o-mini": 128_000}).app) as fake:
        config = goal_config("Save money on agents")
        config["upstreams"]["openai"]["base_url"] = f"{fake.origin}/v1"
        with serve(config, folder) as proxy:
            run(recipe("openai SDK", "python"), proxy.origin, capsys)
    listed = audit_list(folder, capsys)
    assert " all " in f" {listed} ", listed
    assert "gpt-4o-mini" in listed, listed


def test_the_agents_sdk_recipe_goes_through_the_proxy(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("agents")
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # no trace upload, offline
    with ServerThread(FakeOpenAI(windows={"gpt-4o-mini": 128_000}).app) as fake:
        config = goal_config("Save money on agents")
        config["upstreams"]["openai"]["base_url"] = f"{fake.origin}/v1"
        with serve(config, folder) as proxy:
            out = run(recipe("OpenAI Agents SDK", "python"), proxy.origin, capsys)
    assert out.strip()
    listed = audit_list(folder, capsys)
    row = listed.splitlines()[1].split()
    assert row[2:6] == ["responses", "all", "agents", "gpt-4o-mini"], listed


def test_the_curl_recipe_prints_the_curator_headers(openai_proxy: str) -> None:
    """What the curl command sends, sent with httpx; the headers its grep keeps."""
    words = shlex.split(recipe("curl", "sh").replace("\\\n", " ").split("|", 1)[0])
    url = next(w for w in words if w.startswith(PROXY)).replace(PROXY, openai_proxy)
    headers = dict(
        words[i + 1].replace("$OPENAI_API_KEY", "sk-readme-recipe").split(": ", 1)
        for i, w in enumerate(words)
        if w == "-H"
    )
    body = words[words.index("-d") + 1]
    response = httpx.post(url, headers=headers, content=body, timeout=30)
    assert response.status_code == 200
    shown = {name for name in response.headers if name.startswith("x-curator-")}
    assert {"x-curator-route", "x-curator-policy", "x-curator-tokens-before"} <= shown
    assert response.headers["x-curator-route"] == "all"


def test_the_anthropic_sdk_recipe_goes_through_the_proxy(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = yaml.safe_load(recipe("Claude Code and the anthropic SDK", "yaml"))
    assert config["upstreams"]["anthropic"] == {"kind": "anthropic"}
    with ServerThread(FakeAnthropic(windows={"claude-sonnet-4-5": 200_000}).app) as fake:
        config["upstreams"]["anthropic"]["base_url"] = fake.origin
        with serve(config, folder) as proxy:
            out = run(recipe("Claude Code and the anthropic SDK", "python"), proxy.origin, capsys)
    reply, proof = out.strip().splitlines()[-2:]
    assert reply
    route, before, after = proof.split(" ")
    assert route == "claude"
    assert int(before) >= int(after) > 0
    listed = audit_list(folder, capsys)
    assert " claude " in f" {listed} ", listed
    assert "claude-sonnet-4-5" in listed, listed


def test_the_codex_recipe_names_the_proxy_as_its_provider() -> None:
    config = tomllib.loads(recipe("Codex CLI", "toml"))
    assert config["model_provider"] == "curator"
    provider = config["model_providers"]["curator"]
    assert provider["base_url"] == f"{PROXY}/v1"
    assert provider["wire_api"] == "responses"  # the Responses API, curated
    assert provider["env_key"] == "OPENAI_API_KEY"
    assert provider["name"]
