"""The policy loader: YAML with lines, every kind of policy error, files and presets."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from policies.base import CurationContext, Curator, CuratorOutput, PinSpec
from policies.envsubst import substitute
from policies.errors import ConfigError, ParamError
from policies.loader import (
    load_policy,
    load_policy_file,
    load_preset,
    policy_from_spec,
    preset_names,
)
from policies.messages import Message
from policies.policy import Policy
from policies.validate import Problems
from policies.yamlsrc import parse


class _Passes:
    """Curation itself is not under test here, only how curators are built."""

    def curate(self, messages: list[Message], ctx: CurationContext) -> CuratorOutput:  # noqa: ARG002
        return CuratorOutput(list(messages))


@dataclass(frozen=True, slots=True)
class Pins(_Passes):
    name: ClassVar[str] = "pins"
    roles: tuple[str, ...] = ("system",)
    first_user: bool = False

    def pin_spec(self) -> PinSpec:
        return PinSpec(frozenset(self.roles), self.first_user)


@dataclass(frozen=True, slots=True)
class Trim(_Passes):
    name: ClassVar[str] = "trim"
    max_tokens: int = 100
    ratio: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens <= 0:
            raise ParamError("max_tokens", f"must be > 0, got {self.max_tokens}")
        if self.ratio > 1:
            raise ParamError("ratio", f"must be <= 1, got {self.ratio}")


@dataclass(frozen=True, slots=True)
class Needs(_Passes):
    name: ClassVar[str] = "needs"
    limit: int
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for i, tag in enumerate(self.tags):
            if not tag:
                raise ParamError(f"tags[{i}]", "must not be empty")


REGISTRY: Mapping[str, type[Curator]] = {c.name: c for c in (Pins, Trim, Needs)}


def load(text: str, registry: Mapping[str, type[Curator]] = REGISTRY) -> Policy:
    located = parse(textwrap.dedent(text), "p.yaml")
    assert not located.problems
    return load_policy(
        located.data, name="p", file="p.yaml", lines=located.lines, registry=registry
    )


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(text)
    return [str(p) for p in info.value.problems]


def test_full_policy_builds_chain_pins_and_settings() -> None:
    policy = load(
        """
        context_window: 32000
        reserve_output_tokens: 0
        on_overflow: reject
        curators:
          - pins: {roles: [system, developer], first_user: true}
          - trim: {max_tokens: 50}
          - needs: {limit: 3}
        """
    )
    assert policy.name == "p"
    assert policy.context_window == 32000
    assert policy.reserve_output_tokens == 0
    assert policy.on_overflow == "reject"
    assert policy.chain.names == ("pins", "trim", "needs")
    assert policy.chain.curators[1] == Trim(max_tokens=50)
    assert policy.pins == PinSpec(frozenset({"system", "developer"}), first_user=True)


def test_defaults_and_bare_names() -> None:
    policy = load("curators: [trim, {pins: null}, {trim: {}}]\n")
    assert policy.context_window is None
    assert policy.reserve_output_tokens is None
    assert policy.on_overflow == "truncate"
    assert policy.chain.curators == (Trim(), Pins(), Trim())
    assert policy.pins == PinSpec(frozenset({"system"}))


def test_no_pin_source_gives_default_pins() -> None:
    assert load("curators: [trim]\n").pins == PinSpec()
    assert load("{}\n").chain.curators == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("context_window: 0\n", "p.yaml:1: context_window: expected 'auto' or an integer > 0"),
        ("context_window: big\n", "p.yaml:1: context_window: expected 'auto' or an integer > 0"),
        (
            "context_window: true\n",
            "p.yaml:1: context_window: expected 'auto' or an integer > 0, got a boolean (true)",
        ),
        ("reserve_output_tokens: -1\n", "p.yaml:1: reserve_output_tokens: expected 'auto' or an"),
        ("on_overflow: drop\n", "p.yaml:1: on_overflow: expected truncate | reject | forward"),
        ("curator: []\n", "p.yaml:1: curator: unknown key 'curator'; did you mean 'curators'?"),
        ("curators: trim\n", "p.yaml:1: curators: expected a list of curators, got a string"),
        ("- trim\n", "p.yaml:1: expected a policy mapping, got a list"),
        ("curators:\n  - 7\n", "p.yaml:2: curators[0]: expected a curator name or a single-key"),
        (
            "curators:\n  - trim\n  - trimm: {}\n",
            "p.yaml:3: curators[1]: unknown curator 'trimm'; did you mean 'trim'?",
        ),
        (
            "curators:\n  - trim:\n    max_tokens: 5\n",
            "p.yaml:2: curators[0]: expected a curator name or a single-key mapping",
        ),
        ("curators:\n  - trim: [1]\n", "p.yaml:2: curators[0].trim: expected a mapping of param"),
        (
            "curators:\n  - trim:\n      max_tokens: -5\n",
            "p.yaml:3: curators[0].trim.max_tokens: must be > 0, got -5",
        ),
        (
            "curators:\n  - trim:\n      max_tokens: 5\n      ratio: 2\n",
            "p.yaml:4: curators[0].trim.ratio: must be <= 1, got 2",
        ),
        (
            "curators:\n  - trim: {max_token: 5}\n",
            "p.yaml:2: curators[0].trim.max_token: unknown parameter 'max_token'; did you mean "
            "'max_tokens'?",
        ),
        ("curators:\n  - needs: {}\n", "p.yaml:2: curators[0].needs: missing required parameter"),
        (
            "curators:\n  - needs:\n      limit: 1\n      tags:\n        - a\n        - ''\n",
            "p.yaml:6: curators[0].needs.tags[1]: must not be empty",
        ),
        (
            "curators:\n  - pins\n  - trim\n  - pins\n",
            "p.yaml:4: curators[2]: pins appears twice (also curators[0])",
        ),
    ],
)
def test_problem_has_line_and_key_path(text: str, expected: str) -> None:
    found = problems(text)
    assert len(found) == 1, found
    assert found[0].startswith(expected), found


def test_all_problems_are_reported_at_once_in_line_order() -> None:
    found = problems(
        """\
        on_overflow: nope
        context_window: -1
        curators:
          - trim: {max_tokens: 0}
          - missing
        """
    )
    assert [p.split(":")[1] for p in found] == ["1", "2", "4", "5"]


def test_base_path_prefixes_every_key_path() -> None:
    text = "policies:\n  agents:\n    curators:\n      - trim: {max_tokens: -5}\n"
    located = parse(text, "config.yaml")
    with pytest.raises(ConfigError) as info:
        load_policy(
            located.data["policies"]["agents"],
            name="agents",
            file="config.yaml",
            lines=located.lines,
            base_path=("policies", "agents"),
            registry=REGISTRY,
        )
    assert str(info.value) == (
        "config.yaml:4: policies.agents.curators[0].trim.max_tokens: must be > 0, got -5"
    )


def test_policy_file_errors_name_that_file(tmp_path: Path) -> None:
    file = tmp_path / "agents.yaml"
    file.write_text("curators:\n  - trim: {max_tokens: 10}\n  - trim: {max_tokens: -1}\n")
    with pytest.raises(ConfigError) as info:
        load_policy_file(file, registry=REGISTRY)
    assert str(info.value) == f"{file}:3: curators[1].trim.max_tokens: must be > 0, got -1"


def test_policy_file_name_defaults_to_its_stem(tmp_path: Path) -> None:
    file = tmp_path / "agents.yaml"
    file.write_text("curators: [trim]\n")
    assert load_policy_file(file, registry=REGISTRY).name == "agents"
    assert load_policy_file(file, name="x", registry=REGISTRY).name == "x"


def test_unreadable_policy_file_is_a_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read: No such file"):
        load_policy_file(tmp_path / "nope.yaml", registry=REGISTRY)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"curators: []\n\xff\xfe")
    with pytest.raises(ConfigError, match=r"binary\.yaml: cannot read: not UTF-8 text \(byte 13\)"):
        load_policy_file(binary, registry=REGISTRY)


def spec(value: Any, tmp_path: Path) -> tuple[Policy | None, list[str]]:
    sink = Problems("config.yaml", {("policies", "x"): 7})
    policy = policy_from_spec(
        value, name="x", path=("policies", "x"), problems=sink, base_dir=tmp_path, registry=REGISTRY
    )
    return policy, [str(p) for p in sink.items]


def test_spec_forms(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.yaml").write_text("on_overflow: forward\n")
    from_file, none = spec("sub/a.yaml", tmp_path)
    assert none == []
    assert from_file is not None
    assert (from_file.name, from_file.on_overflow) == ("x", "forward")
    inline, none = spec({"curators": ["trim"]}, tmp_path)
    assert inline is not None
    assert inline.chain.names == ("trim",)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("missing.yaml", "config.yaml:7: policies.x: policy file not found: "),
        ("preset:chatt", "config.yaml:7: policies.x: unknown preset 'chatt'; did you mean 'chat'?"),
        (5, "config.yaml:7: policies.x: expected a policy file path, 'preset:<name>' or a map"),
        ("", "config.yaml:7: policies.x: expected a policy file path"),
    ],
)
def test_spec_problems(value: object, expected: str, tmp_path: Path) -> None:
    policy, found = spec(value, tmp_path)
    assert policy is None
    assert len(found) == 1
    assert found[0].startswith(expected)


def test_preset_spec_uses_config_name() -> None:
    sink = Problems("c.yaml", {})
    policy = policy_from_spec(
        "preset:passthrough", name="off", path=("policies", "off"), problems=sink, base_dir=Path()
    )
    assert sink.items == []
    assert policy is not None
    assert (policy.name, policy.chain.curators) == ("off", ())


def test_preset_names_and_unknown_preset() -> None:
    assert {"default", "coding-agent", "chat", "passthrough"} <= set(preset_names())
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        load_preset("nope")


def test_policy_file_gets_env_substitution(tmp_path: Path) -> None:
    file = tmp_path / "p.yaml"
    file.write_text("context_window: ${WINDOW:-1000}\non_overflow: ${MODE}\n")
    policy = load_policy_file(file, registry=REGISTRY, env={"MODE": "reject"})
    assert (policy.context_window, policy.on_overflow) == (1000, "reject")


class TestYamlSource:
    def test_lines_of_keys_and_items(self) -> None:
        located = parse("a:\n  b:\n    - 1\n    - c: 2\n", "f.yaml")
        assert located.data == {"a": {"b": [1, {"c": 2}]}}
        assert located.line(("a", "b", 1, "c")) == 4
        assert located.line(("a", "b", 0)) == 3
        assert located.line(("a", "missing", "deeper")) == 1

    def test_duplicate_key_is_a_problem(self) -> None:
        located = parse("a: 1\nb: 2\na: 3\n", "f.yaml")
        assert [str(p) for p in located.problems] == [
            "f.yaml:3: a: duplicate key 'a' (first on line 1)"
        ]

    def test_merge_keys_are_not_duplicates(self) -> None:
        located = parse("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 5\n", "f.yaml")
        assert located.problems == ()
        assert located.data["m"] == {"x": 1, "y": 5}

    @pytest.mark.parametrize(
        ("text", "line"),
        [("a: [1, 2\nb: 3\n", 2), ("a: 1\n  b: 2\n", 2), ("a: 1\n---\nb: 2\n", 2), ("a: 'x\n", 2)],
    )
    def test_syntax_error_is_located(self, text: str, line: int) -> None:
        with pytest.raises(ConfigError) as info:
            parse(text, "f.yaml")
        (problem,) = info.value.problems
        assert (problem.file, problem.line, problem.path) == ("f.yaml", line, "")
        assert problem.message.startswith("invalid YAML: ")

    def test_unsafe_tag_is_rejected(self) -> None:
        located = parse("x: !!python/object:os.system 1\n", "f.yaml")
        assert located.data == {"x": None}
        assert "could not determine a constructor" in str(located.problems[0])

    def test_recursive_alias_is_a_problem(self) -> None:
        located = parse("r: &r [*r]\n", "f.yaml")
        assert str(located.problems[0]).startswith("f.yaml:1: r[0]: recursive alias")

    def test_empty_document(self) -> None:
        assert parse("# nothing\n", "f.yaml").data is None

    def test_yaml_boolean_words_stay_text_as_keys(self) -> None:
        assert parse("off: 1\nyes: 2\n", "f.yaml").data == {"off": 1, "yes": 2}

    def test_a_lone_equals_sign_is_text(self) -> None:
        # YAML 1.1 tags `=` as a "value key", which PyYAML cannot construct.
        located = parse("=: 1\na: =\n", "f.yaml")
        assert located.data == {"=": 1, "a": "="}
        assert located.problems == ()

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("a:\n  !!int x: 1\n", "f.yaml:2: a.x: invalid key: invalid literal for int()"),
            ("a:\n  b: !!int x\n", "f.yaml:2: a.b: invalid value: invalid literal for int()"),
            ("a: !!float 1e5x\n", "f.yaml:1: a: invalid value: could not convert string"),
        ],
    )
    def test_a_scalar_its_tag_does_not_fit_is_one_located_problem(
        self, text: str, expected: str
    ) -> None:
        (problem,) = parse(text, "f.yaml").problems
        assert str(problem).startswith(expected)


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${A}", {"A": "x"}, "x"),
        ("a${A}b${B}", {"A": "1", "B": "2"}, "a1b2"),
        ("${A:-dflt}", {}, "dflt"),
        ("${A:-dflt}", {"A": ""}, "dflt"),
        ("${A:-}", {}, ""),
        ("${A}", {"A": ""}, ""),
        ("$${A}", {"A": "x"}, "${A}"),
        ("cost: $5 $$", {}, "cost: $5 $"),
        ("${A:-a:-b}", {}, "a:-b"),
    ],
)
def test_substitute(text: str, env: dict[str, str], expected: str) -> None:
    assert substitute(text, env) == (expected, [])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("${MISSING}", "environment variable 'MISSING' is not set"),
        ("${1BAD}", "malformed variable reference '${1BAD}'"),
        ("${OPEN", "malformed variable reference '${'"),
    ],
)
def test_substitute_problems(text: str, problem: str) -> None:
    result, problems_found = substitute(text, {})
    assert result == text
    assert len(problems_found) == 1
    assert problems_found[0].startswith(problem)
