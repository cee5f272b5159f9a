"""config/render.py: what `curator check` prints of a valid config (routes, upstreams with
their credentials masked, models, audit and metrics, each policy's chain and parameters)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.base import CurationContext, CuratorOutput, PinSpec
from policies.chain import Chain
from policies.messages import Message
from policies.policy import Policy
from proxy.config.audit import AuditConfig, RedactConfig
from proxy.config.metrics import MetricsConfig
from proxy.config.render import _params, _plain, _policy_lines, format_config
from proxy.observability.audit.redact import custom_detector
from tests.proxy.config.configs import MINIMAL, load

FULL = """\
server: {host: 0.0.0.0, port: 9000, workers: 2}
upstreams:
  openai: {base_url: "https://api.example.com/v1", api_key: sk-test-secret}
  local: {base_url: "http://127.0.0.1:8000/v1"}
  gateway: {base_url: "https://user:pw@gw.example.com/v1"}
models:
  "llama-*": {context_window: 8192, max_input_tokens: 4096, encoding: cl100k_base}
  "small-*": {context_window: 2000}
audit: {sink: none}
metrics: {enabled: false}
policies:
  agents:
    context_window: 1000
    reserve_output_tokens: 100
    on_overflow: reject
    curators:
      - system_preservation: {pin_first_user: true}
      - turn_window: {max_turns: 3}
  "off": {curators: []}
routes:
  - name: agents
    match: {path: /v1/chat/*, model: "gpt-4o*", headers: {X-Team: agents}}
    upstream: openai
    policy: agents
    allow_policy_header: true
    mode: shadow
  - {name: exact, match: {model: "x"}, upstream: gateway, policy: "off"}
  - {name: rest, upstream: local, policy: "off", mode: "off"}
"""


def test_a_config_is_shown_section_by_section(tmp_path: Path) -> None:
    config = load(tmp_path, FULL)
    assert format_config(config).splitlines() == [
        f"config: {tmp_path / 'config.yaml'}: OK",
        "server: 0.0.0.0:9000 (2 worker(s))",
        "audit: off",
        "metrics: off",
        "",
        "routes (first match wins):",
        "  1. agents",
        "     match: path=/v1/chat/* model=gpt-4o* header x-team=agents",
        "     upstream: openai https://api.example.com/v1 (api_key set)",
        "     policy: agents (x-curator-policy header allowed)",
        "     mode: shadow (curated and reported only: the upstream gets the client's exact bytes)",
        "  2. exact",
        "     match: model=x",
        "     upstream: gateway https://gw.example.com/v1 (Basic credentials from the URL)",
        "     policy: off (x-curator-policy header ignored)",
        "     mode: enforce",
        "  3. rest",
        "     match: everything",
        "     upstream: local http://127.0.0.1:8000/v1 (client's Authorization passed through)",
        "     policy: off (x-curator-policy header ignored)",
        "     mode: off (no curation, no token counting: the upstream gets the client's exact "
        "bytes)",
        "",
        "models:",
        "  llama-*: context_window 8192, max_input_tokens 4096, cl100k_base",
        "  small-*: context_window 2000, tiktoken's own choice",
        "",
        "policies:",
        "  agents:",
        "    context_window: 1000, reserve_output_tokens: 100, on_overflow: reject",
        "    pinned: developer, system + first user message",
        "    curators:",
        "      - system_preservation: {roles: [system, developer], pin_first_user: true}",
        "      - turn_window: {max_turns: 3}",
        "  off:",
        "    context_window: auto, reserve_output_tokens: auto, on_overflow: truncate",
        "    pinned: developer, system",
        "    curators: none (requests pass through unchanged)",
    ]
    assert "sk-test-secret" not in format_config(config)
    assert ":pw@" not in format_config(config)
    assert "dXNlcjpwdw" not in format_config(config)  # nor user:pw in base64


def test_without_model_overrides_there_is_no_models_section(tmp_path: Path) -> None:
    lines = format_config(load(tmp_path, MINIMAL)).splitlines()
    assert "models:" not in lines
    assert lines[lines.index("policies:") - 2 : lines.index("policies:")] == [
        "     mode: enforce",
        "",
    ]


# -- audit and metrics -----------------------------------------------------------------


def with_observability(
    tmp_path: Path, audit: AuditConfig, metrics: MetricsConfig | None = None
) -> list[str]:
    config = dataclasses.replace(
        load(tmp_path, MINIMAL), audit=audit, metrics=metrics or MetricsConfig()
    )
    return format_config(config).splitlines()[2:4]


@pytest.mark.parametrize(
    ("audit", "shown"),
    [
        (
            AuditConfig(path="/data/audit.db"),
            "audit: sqlite /data/audit.db (responses stored; redaction: built-in patterns)",
        ),
        (
            AuditConfig(sink="jsonl", path="-", store_responses=False),
            "audit: jsonl stdout (responses not stored; redaction: built-in patterns)",
        ),
        (
            AuditConfig(
                sink="postgres",
                path="postgresql://curator:hunter2@db:5432/audit",
                redact=RedactConfig(builtin=False),
            ),
            "audit: postgres postgresql://***@db:5432/audit "
            "(responses stored; redaction: no built-in patterns)",
        ),
        (
            AuditConfig(
                sink="postgres",
                path="host=db password=hunter2 dbname=audit",
                redact=RedactConfig(patterns=(custom_detector("emp", "EMP-[0-9]{6}"),)),
            ),
            "audit: postgres host=db password=*** dbname=audit "
            "(responses stored; redaction: built-in patterns + 1 of yours)",
        ),
        (
            AuditConfig(
                path="a.db",
                redact=RedactConfig(
                    builtin=False,
                    patterns=(custom_detector("a", "A+"), custom_detector("b", "B+")),
                ),
            ),
            "audit: sqlite a.db (responses stored; redaction: no built-in patterns + 2 of yours)",
        ),
        (AuditConfig(sink="none"), "audit: off"),
    ],
)
def test_the_audit_line_says_where_records_go_never_a_password(
    tmp_path: Path, audit: AuditConfig, shown: str
) -> None:
    assert with_observability(tmp_path, audit)[0] == shown


@pytest.mark.parametrize(
    ("metrics", "shown"),
    [
        (MetricsConfig(), "metrics: GET /metrics on the main listener"),
        (MetricsConfig(path="/m"), "metrics: GET /m on the main listener"),
        (MetricsConfig(port=9464), "metrics: GET /metrics on the admin listener 127.0.0.1:9464"),
        (
            MetricsConfig(port=9464, host="10.0.0.5"),
            "metrics: GET /metrics on the admin listener 10.0.0.5:9464",
        ),
        (MetricsConfig(port=0), "metrics: GET /metrics on the admin listener 127.0.0.1:0"),
        (MetricsConfig(enabled=False, port=9464), "metrics: off"),
    ],
)
def test_the_metrics_line_says_where_they_are_served(
    tmp_path: Path, metrics: MetricsConfig, shown: str
) -> None:
    assert with_observability(tmp_path, AuditConfig(sink="none"), metrics)[1] == shown


# -- policies and curator parameters ---------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """A curator whose parameters are every kind `_plain` handles."""

    name: ClassVar[str] = "probe"

    cache: str = "redis://:s3cret@cache:6379/0"
    limit: int | None = None
    ratio: float = 0.5
    enabled: bool = True
    roles: frozenset[str] = frozenset({"tool", "assistant"})
    pair: tuple[int, ...] = (1, 2)
    table: Mapping[Any, Any] = field(default_factory=lambda: {1: ["a"], "k": None})
    hook: object = len
    derived: int = field(default=7, init=False)

    def curate(
        self,
        messages: Sequence[Message],
        ctx: CurationContext,  # noqa: ARG002 - the Curator protocol's signature
    ) -> CuratorOutput:
        return CuratorOutput(list(messages))


def test_curator_parameters_are_yaml_flow_text_with_urls_masked() -> None:
    assert _params(Probe()) == (
        "{cache: 'redis://***@cache:6379/0', limit: null, ratio: 0.5, enabled: true, "
        "roles: [assistant, tool], pair: [1, 2], table: {'1': [a], k: null}, "
        "hook: <built-in function len>}"
    )


def test_a_curator_that_is_no_dataclass_shows_no_parameters() -> None:
    class Plain:
        name = "plain"

    assert _params(Plain()) == "{}"


def test_a_policy_lists_its_curators_in_order() -> None:
    pins = PinSpec(roles=frozenset({"system"}), first_user=True)
    policy = Policy("p", Chain((Probe(limit=3), Probe())), pins=pins)
    lines = _policy_lines("p", policy)
    assert lines[:4] == [
        "  p:",
        "    context_window: auto, reserve_output_tokens: auto, on_overflow: truncate",
        "    pinned: system + first user message",
        "    curators:",
    ]
    assert [line.split(":")[0] for line in lines[4:]] == ["      - probe", "      - probe"]
    assert lines[4].startswith("      - probe: {cache: 'redis://***@cache:6379/0', limit: 3, ")


def test_a_long_parameter_is_never_wrapped() -> None:
    @dataclass(frozen=True)
    class Wide:
        text: str = "word " * 40

    assert _params(Wide()) == "{text: '" + "word " * 39 + "word '}"


plain_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers(), max_size=3)
        | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=3)
        | st.builds(object)
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(plain_values)
def test_plain_values_are_always_safe_yaml(value: object) -> None:
    """Whatever a curator holds, its parameters dump as YAML's own types and read back."""
    plain = _plain(value)
    text = yaml.safe_dump(plain, default_flow_style=True, sort_keys=False)
    assert yaml.safe_load(text) == plain
