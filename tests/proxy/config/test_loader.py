"""Config loading: the resolved dataclasses, ${ENV} substitution, and every kind of error."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.errors import ConfigError
from policies.loader import load_preset
from policies.models import ModelInfo
from proxy.config.loader import (
    DEFAULT_UPSTREAM,
    Route,
    RouteMatch,
    ServerConfig,
    UpstreamConfig,
    default_config,
    load_config,
)
from tests.proxy.config.configs import MINIMAL, assert_one_problem, load, problems, write

ROOT = Path(__file__).resolve().parents[3]


def test_full_config_resolves(tmp_path: Path) -> None:
    write(tmp_path, "curators: [tool_pair_coherence]\n", "agents.yaml")
    config = load(
        tmp_path,
        """\
        server: {host: 0.0.0.0, port: 9000, workers: 2}
        upstreams:
          openai:
            base_url: https://api.openai.com/v1/
            api_key: sk-test
            connect_timeout_s: 2.5
            read_timeout_s: 30
          local: {base_url: "http://127.0.0.1:8000/v1"}
        models:
          "llama-*": {context_window: 8192, max_input_tokens: 4096, encoding: cl100k_base}
        policies:
          agents: agents.yaml
          chat: preset:chat
          off: {curators: []}
        routes:
          - name: agents
            match: {path: /v1/chat/*, model: "gpt-4o*", headers: {X-Team: agents}}
            upstream: openai
            policy: agents
            allow_policy_header: true
          - {name: rest, upstream: local, policy: chat}
        """,
    )
    assert config.source == str(tmp_path / "config.yaml")
    assert config.server == ServerConfig("0.0.0.0", 9000, 2)
    assert config.upstreams["openai"] == UpstreamConfig(
        "openai", "https://api.openai.com/v1", "sk-test", 2.5, 30.0
    )
    assert config.upstreams["local"] == UpstreamConfig("local", "http://127.0.0.1:8000/v1")
    assert config.models.overrides == (("llama-*", ModelInfo(8192, 4096, "cl100k_base")),)
    assert config.models.lookup("llama-3-8b").context_window == 8192
    assert config.routes == (
        Route(
            "agents",
            "openai",
            "agents",
            RouteMatch("/v1/chat/*", "gpt-4o*", (("x-team", "agents"),)),
            allow_policy_header=True,
        ),
        Route("rest", "local", "chat"),
    )
    assert config.policies["agents"].chain.names == ("tool_pair_coherence",)
    assert config.policies["chat"].chain == load_preset("chat").chain
    assert config.policies["chat"].name == "chat"
    assert config.policies["off"].chain.curators == ()


def test_defaults_for_optional_keys(tmp_path: Path) -> None:
    config = load(tmp_path, MINIMAL)
    assert config.server == ServerConfig()
    assert config.upstreams["openai"].api_key is None
    assert config.upstreams["openai"].read_timeout_s == 600.0
    assert config.upstreams["openai"].discover_models is True
    quiet = load(tmp_path, MINIMAL.replace("}\npolicies", ", discover_models: false}\npolicies"))
    assert quiet.upstreams["openai"].discover_models is False
    assert config.models.overrides == ()
    assert config.routes[0].match == RouteMatch()
    assert config.routes[0].allow_policy_header is False


def test_policy_paths_are_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf" / "policies").mkdir(parents=True)
    write(tmp_path / "conf" / "policies", "on_overflow: reject\n", "a.yaml")
    config_text = MINIMAL.replace("off: preset:passthrough", "off: policies/a.yaml")
    path = write(tmp_path / "conf", config_text)
    monkeypatch.chdir(tmp_path)
    assert load_config(path, environ={}).policies["off"].on_overflow == "reject"


def test_example_config_is_valid() -> None:
    config = load_config(ROOT / "config.example.yaml", environ={})
    assert [r.name for r in config.routes] == ["agents", "local", "default"]
    assert config.upstreams["openai"].api_key is None
    assert config.upstreams["local"].base_url == "http://127.0.0.1:8000/v1"
    assert set(config.policies) == {"agents", "coding", "chat", "off"}


class TestEnvironment:
    TEXT = """\
    server:
      host: ${HOST:-127.0.0.1}
      port: ${PORT:-8080}
    upstreams:
      openai:
        base_url: ${UPSTREAM:-https://api.openai.com/v1}
        api_key: ${OPENAI_API_KEY:-}
    policies: {off: preset:passthrough}
    routes: [{name: default, upstream: openai, policy: "off"}]
    """

    def test_defaults_apply_when_unset(self, tmp_path: Path) -> None:
        config = load(tmp_path, self.TEXT)
        assert config.server == ServerConfig("127.0.0.1", 8080)
        assert config.upstreams["openai"].api_key is None

    def test_values_come_from_the_environment_and_are_typed(self, tmp_path: Path) -> None:
        env = {"PORT": "9999", "OPENAI_API_KEY": "sk-abc", "UPSTREAM": "http://h:1/v1/"}
        config = load(tmp_path, self.TEXT, env)
        assert config.server.port == 9999
        assert config.upstreams["openai"] == UpstreamConfig("openai", "http://h:1/v1", "sk-abc")

    def test_environment_text_never_becomes_yaml_structure(self, tmp_path: Path) -> None:
        config = load(tmp_path, self.TEXT, {"HOST": "[1, 2]", "OPENAI_API_KEY": "{a: 1}"})
        assert config.server.host == "[1, 2]"
        assert config.upstreams["openai"].api_key == "{a: 1}"

    def test_dollar_escape_and_quoted_values_stay_text(self, tmp_path: Path) -> None:
        text = self.TEXT.replace("${OPENAI_API_KEY:-}", '"$${NOT_A_VAR}$$"')
        config = load(tmp_path, text, {"NOT_A_VAR": "x"})
        assert config.upstreams["openai"].api_key == "${NOT_A_VAR}$"
        quoted = self.TEXT.replace("${PORT:-8080}", '"${PORT:-8080}"')
        assert problems(tmp_path, quoted) == [
            "config.yaml:3: server.port: expected an integer from 1 to 65535, got a string '8080'"
        ]

    def test_unset_variable_names_variable_and_key(self, tmp_path: Path) -> None:
        text = self.TEXT.replace("${OPENAI_API_KEY:-}", "${OPENAI_API_KEY}")
        assert problems(tmp_path, text) == [
            "config.yaml:7: upstreams.openai.api_key: environment variable 'OPENAI_API_KEY' is "
            "not set (use ${OPENAI_API_KEY:-default} for a default)"
        ]

    def test_unset_variable_is_the_only_problem_for_its_key(self, tmp_path: Path) -> None:
        text = self.TEXT.replace("${UPSTREAM:-https://api.openai.com/v1}", "${UPSTREAM}")
        found = problems(tmp_path, text)
        assert len(found) == 1
        assert found[0].startswith("config.yaml:6: upstreams.openai.base_url: environment var")


ERRORS = [
    ("uptreams: {}\n" + MINIMAL, "config.yaml:1: uptreams: unknown key 'uptreams'; did you mean"),
    ("- a\n", "config.yaml:1: expected a mapping, got a list"),
    (
        MINIMAL.replace("preset:passthrough", "preset:chatt"),
        "config.yaml:4: policies.off: unknown preset 'chatt'; did you mean 'chat'?",
    ),
    (
        MINIMAL.replace("preset:passthrough", "nope.yaml"),
        "config.yaml:4: policies.off: policy file not found: ",
    ),
    (
        MINIMAL.replace(
            "preset:passthrough", "\n    curators:\n      - turn_window: {max_turns: 0}"
        ),
        "config.yaml:6: policies.off.curators[0].turn_window.max_turns: must be > 0, got 0",
    ),
    (
        MINIMAL.replace("preset:passthrough", "{curators: [tool_result_trunc]}"),
        "config.yaml:4: policies.off.curators[0]: unknown curator 'tool_result_trunc'; did you "
        "mean 'tool_result_truncation'?",
    ),
    ("server: {port: 1\n" + MINIMAL, "config.yaml:2: invalid YAML: "),
    (MINIMAL.split("routes:")[0], "config.yaml:1: missing required section 'routes'"),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_error_has_file_line_and_key_path(tmp_path: Path, text: str, expected: str) -> None:
    assert_one_problem(tmp_path, text, expected)


def test_misspelled_required_section(tmp_path: Path) -> None:
    assert problems(tmp_path, MINIMAL.replace("routes:\n  - ", "routs:\n  - ")) == [
        "config.yaml:1: missing required section 'routes'",
        "config.yaml:5: routs: unknown key 'routs'; did you mean 'routes'?",
    ]


def test_encoding_suggestion(tmp_path: Path) -> None:
    (found,) = problems(
        tmp_path, MINIMAL + "models:\n  'x*': {context_window: 9, encoding: o200k}\n"
    )
    assert found.endswith("got a string 'o200k'; did you mean 'o200k_base'?")


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        server: {port: 0}
        upstreams:
          openai: {base_url: "nope"}
        policies:
          p: {on_overflow: maybe}
        routes:
          - {name: r, upstream: missing, policy: p}
        """,
    )
    assert [line.split(": ", 2)[1] for line in found] == [
        "server.port",
        "upstreams.openai.base_url",
        "policies.p.on_overflow",
        "routes[0].upstream",
    ]


def test_problems_in_a_policy_file_name_that_file(tmp_path: Path) -> None:
    write(tmp_path, "curators:\n  - token_budget: {low_water: 3}\n", "agents.yaml")
    text = MINIMAL.replace("preset:passthrough", "agents.yaml")
    found = problems(tmp_path, text)
    assert len(found) == 1
    assert found[0].startswith("agents.yaml:2: curators[0].token_budget.low_water: ")


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.yaml")
    assert str(info.value) == f"{tmp_path}/absent.yaml: cannot read: No such file or directory"


def test_invalid_route_reference_to_an_invalid_upstream_is_reported_once(tmp_path: Path) -> None:
    text = MINIMAL.replace('"https://api.openai.com/v1"', "nope")
    assert len(problems(tmp_path, text)) == 1


class TestDefaults:
    def test_openai_with_default_preset(self) -> None:
        config = default_config({})
        assert config.source == "<defaults>"
        assert config.server == ServerConfig("127.0.0.1", 8080, 1)
        assert config.upstreams == {"default": UpstreamConfig("default", DEFAULT_UPSTREAM)}
        assert config.routes == (Route("default", "default", "default"),)
        assert config.policies["default"].chain == load_preset("default").chain

    def test_upstream_from_environment(self) -> None:
        config = default_config({"CURATOR_UPSTREAM": "http://127.0.0.1:11434/v1/"})
        assert config.upstreams["default"].base_url == "http://127.0.0.1:11434/v1"
        assert config.upstreams["default"].api_key is None

    def test_invalid_upstream_in_environment(self) -> None:
        with pytest.raises(ConfigError, match=r"^\$CURATOR_UPSTREAM: expected an http\(s\) URL"):
            default_config({"CURATOR_UPSTREAM": "localhost:11434"})
