"""The replay cost benchmark on a tiny run: what it counts, rejects and prints."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from bench import replay
from bench.replay import FULL, NAIVE, Replay, Row, naive_window, replay_rows, setup, target_met
from policies.invariants import ordering_errors
from policies.loader import load_preset
from policies.policy import SAFETY_MARGIN
from tests.factories import assistant_calls, long_text, system, tool_result, user

TURNS = 16
WINDOW = 16_384
MESSAGES = "naive window (messages)"
CODING = "preset coding-agent"


@pytest.fixture(scope="module")
def tiny() -> Replay:
    return setup(TURNS, WINDOW, 0.1)


@pytest.fixture(scope="module")
def rows(tiny: Replay) -> dict[str, Row]:
    return {r.strategy: r for r in replay_rows(tiny, [NAIVE, MESSAGES, CODING])}


def test_full_history_is_the_reference_and_overflows_the_window(
    tiny: Replay, rows: dict[str, Row]
) -> None:
    assert list(rows) == [FULL, NAIVE, MESSAGES, CODING]
    full = rows[FULL]
    assert full.cost_ratio == 1.0
    # Rejected: prompt (tools + messages) over the window minus the 4096-token reply reserve.
    counter = tiny.counter
    over = [
        b
        for b in tiny.bodies
        if counter.count_tools(b["tools"], "gpt-4o")
        + counter.count_messages(b["messages"], "gpt-4o")
        > WINDOW - 4096
    ]
    assert 0 < full.rejected == len(over) < TURNS
    sizes = [counter.count_messages(b["messages"], "gpt-4o") for b in tiny.bodies]
    assert full.mean_input_tokens == pytest.approx(
        sum(sizes) / TURNS + counter.count_tools(tiny.bodies[0]["tools"], "gpt-4o")
    )


def test_curated_strategies_fit_and_send_less_than_the_full_history(rows: dict[str, Row]) -> None:
    full = rows[FULL]
    for name in (NAIVE, CODING):
        row = rows[name]
        assert row.rejected == 0, name
        assert row.mean_input_tokens < WINDOW - 4096
        assert row.cost_ratio == pytest.approx(row.cost / full.cost)
        assert 0 < row.hit_ratio < full.hit_ratio
    # What a preset bills here is measured, not asserted: on real agents bench.trajectories
    # is the reference; this synthetic run's outputs are a third of the window each.
    assert rows[CODING].mean_input_tokens < 0.6 * full.mean_input_tokens
    # Dropping single messages orphans tool results, which a strict upstream rejects.
    assert rows[MESSAGES].rejected > 0


def test_naive_window_drops_the_oldest_units_just_enough(tiny: Replay) -> None:
    body: dict[str, Any] = {
        "model": "gpt-4o",
        "tools": [],
        # 1,500 tokens for messages once the safety margin is kept free too.
        "max_completion_tokens": WINDOW - 1_500 - math.ceil(WINDOW * SAFETY_MARGIN),
        "messages": [system("Be brief."), user(long_text(300, "task"))],
    }
    for k in range(4):
        call = assistant_calls(f"c{k}", content=long_text(150, "plan"))
        body["messages"] += [call, tool_result(f"c{k}", long_text(60))]
    messages, budget = body["messages"], tiny.budget(body)
    # The task (a unit of its own) and the first tool block go; the system prompt stays.
    kept = naive_window(tiny, body, by_unit=True)
    assert kept == [messages[0], *messages[4:]]
    assert ordering_errors(kept) == []
    assert tiny.counter.count_messages(kept, "gpt-4o") <= budget
    # Just enough: dropping only the task would not fit.
    assert tiny.counter.count_messages([messages[0], *messages[2:]], "gpt-4o") > budget
    # By message, dropping the first call (not its result) is enough: the result is orphaned.
    by_message = naive_window(tiny, body, by_unit=False)
    assert by_message == [messages[0], *messages[3:]]
    assert ordering_errors(by_message) == ["messages[1]: tool result 'c0' answers no pending call"]


def test_variants_remove_each_curator_but_the_structural_ones() -> None:
    preset = load_preset("coding-agent")
    variants = replay.without_each(preset)
    names = [c.name for c in preset.chain.curators]
    removable = [n for n in names if n not in ("system_preservation", "tool_pair_coherence")]
    assert removable
    assert [v.name for v in variants] == [f"coding-agent without {n}" for n in removable]
    for variant, gone in zip(variants, removable, strict=True):
        assert [c.name for c in variant.chain.curators] == [n for n in names if n != gone]
        assert variant.pins == preset.pins


def row(name: str, ratio: float, rejected: int = 0) -> Row:
    return Row(name, ratio * 1000, ratio, 1.0, 0.5, rejected)


@pytest.mark.parametrize(
    ("coding", "naive", "rejected", "met"),
    [(0.30, 0.9, 0, True), (0.37, 0.9, 0, False), (0.30, 0.2, 0, False), (0.30, 0.9, 1, False)],
)
def test_the_target_needs_36_percent_under_naive_and_no_rejects(
    coding: float, naive: float, rejected: int, met: bool
) -> None:
    rows = [row(FULL, 1.0), row(NAIVE, naive), row(CODING, coding, rejected)]
    assert target_met(rows) is met
    assert replay.verdict(rows).endswith("-> met" if met else "-> NOT MET")


def test_main_prints_one_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert replay.main(["--turns", "4", "--window", "8192"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("4 requests of one coding-agent conversation, 8,192-token window")
    assert lines[1].split() == ["strategy", "cost", "vs", "full", "mean", "input", "tokens",
                                "cache", "hit", "ratio", "rejected"]  # fmt: skip
    names = [line.split("  ")[0] for line in lines[3:-1]]
    assert names[:3] == [FULL, NAIVE, MESSAGES]
    assert {"preset default", "preset chat", CODING, "token_budget low_water=0.4"} <= set(names)
    assert lines[-1].startswith("target: preset coding-agent <= 36% of full history")
    assert replay.main(["--turns", "3", "--json", "--cached-price", "0.5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["turns"], data["cached_price"]) == (3, 0.5)
    assert data["rows"][0]["strategy"] == FULL
    assert isinstance(data["target_met"], bool)


def test_main_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        replay.main(["--turns", "0"])
    assert info.value.code == 2
    assert "--turns and --window must be >= 1" in capsys.readouterr().err
