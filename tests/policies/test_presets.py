"""The shipped presets load with the real curators and curate without breaking the contract."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest

from policies.base import PinSpec
from policies.loader import load_preset, preset_names
from policies.registry import CURATORS
from policies.tokens import TokenCounter
from tests import factories as f

PRESETS = ("default", "coding-agent", "chat", "passthrough")


def test_exactly_the_documented_presets_ship() -> None:
    assert preset_names() == tuple(sorted(PRESETS))


@pytest.mark.parametrize("name", PRESETS)
def test_preset_starts_with_a_comment_saying_who_it_is_for(name: str) -> None:
    text = resources.files("policies").joinpath("presets", f"{name}.yaml").read_text()
    header = text.split("\n\n", 1)[0].splitlines()
    assert header[0].startswith(f'# Preset "{name}"')
    assert all(line.startswith("#") for line in header)
    assert "# Who it is for: " in text
    assert "# Why each setting:" in text
    # Each curator line in the preset is explained by a comment just above it.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("- "):
            assert lines[i - 1].lstrip().startswith("#"), line


def params(name: str) -> list[tuple[str, dict[str, Any]]]:
    chain = load_preset(name).chain
    return [(c.name, {k: getattr(c, k) for k in c.__dataclass_fields__}) for c in chain.curators]


def test_default_preset() -> None:
    policy = load_preset("default")
    assert policy.chain.names == (
        "system_preservation",
        "turn_masking",
        "token_budget",
        "tool_pair_coherence",
    )
    masking = dict(params("default"))["turn_masking"]
    # Nothing changes below 16k tokens (or half a small window), and the newest 15 steps
    # stay whole: a no-config proxy saves on long runs and never blinds the agent.
    assert (masking["trigger_tokens"], masking["trigger_share"]) == (16000, 0.5)
    assert masking["keep_turns"] == 15
    assert dict(params("default"))["token_budget"]["max_tokens"] == "auto"
    assert policy.pins == PinSpec(frozenset({"system", "developer"}), first_user=True)
    assert (policy.context_window, policy.reserve_output_tokens) == (None, None)
    assert policy.on_overflow == "truncate"


def test_coding_agent_preset_pins_the_task_and_is_cache_friendly() -> None:
    policy = load_preset("coding-agent")
    assert policy.pins.first_user is True
    assert policy.chain.names == (
        "system_preservation",
        "turn_masking",
        "token_budget",
        "tool_pair_coherence",
    )
    masking = dict(params("coding-agent"))["turn_masking"]
    # A chunk saves 10,000 tokens on every later request: a cache break pays for itself.
    assert (masking["trigger_tokens"], masking["step_tokens"], masking["keep_turns"]) == (
        16000,
        10000,
        12,
    )
    assert masking["keep_lines"] > 0
    assert masking["keep_names"] > 0
    assert dict(params("coding-agent"))["token_budget"]["low_water"] == 0.6


def test_chat_preset_is_cache_friendly_and_keeps_the_first_question() -> None:
    policy = load_preset("chat")
    assert policy.pins.first_user is True
    assert policy.chain.names == (
        "system_preservation",
        "history_retention",
        "turn_masking",
        "token_budget",
        "tool_pair_coherence",
    )
    found = dict(params("chat"))
    assert found["history_retention"]["keep_recent_turns"] == 3
    assert found["turn_masking"]["trigger_tokens"] == 64000
    assert found["token_budget"]["low_water"] == 0.7


def test_passthrough_preset_has_no_curators() -> None:
    assert load_preset("passthrough").chain.curators == ()


def test_presets_only_use_registered_curators() -> None:
    for name in PRESETS:
        assert set(load_preset(name).chain.names) <= set(CURATORS)


def conversation() -> list[f.Msg]:
    long_output = f.long_text(3000)
    return [
        f.system(),
        f.user("Fix the failing test."),
        f.assistant_calls(("c1", "read_file", '{"path": "a.py"}')),
        f.tool_result("c1", long_output),
        f.assistant_calls(("c2", "run_tests", "{}")),
        f.tool_result("c2", long_output),
        f.assistant_calls(("c3", "run_tests", "{}")),
        f.tool_result("c3", long_output),
        f.assistant_calls(("c4", "run_tests", "{}")),
        f.tool_result("c4", "1 passed"),
        f.user("Thanks, now explain it."),
    ]


@pytest.mark.parametrize("name", PRESETS)
def test_preset_curates_within_the_contract(name: str, counter: TokenCounter) -> None:
    messages = conversation()
    body = {"model": "gpt-4o", "messages": messages}
    result = load_preset(name).curate(messages, body, counter, check=True)
    assert result.messages[0] == messages[0]
    assert result.messages[-1] == messages[-1]
    assert result.tokens_after <= result.tokens_before
    if name == "passthrough":
        assert result.messages == messages
        assert not result.actions
