"""bench.claude_replay: a short Claude-Code-shaped session through a preset against the
strict caching fake: nothing refused, cached and priced, and the table says so."""

from __future__ import annotations

import pytest

from bench.claude_replay import WHOLE, main, replay_all, table, writes_above
from bench.claude_session import TOOL_NAMES, session


def test_the_session_is_claude_code_shaped() -> None:
    first, *_, last = list(session(14))
    assert len(first["tools"]) == len(TOOL_NAMES) == 26
    assert [("cache_control" in b) for b in first["system"]] == [True, True, True]
    assert last["context_management"]["edits"][0]["type"].startswith("clear_thinking")
    assert any(b["type"] == "thinking" for m in last["messages"] for b in m["content"])
    marked = [b for m in last["messages"] for b in m["content"] if "cache_control" in b]
    assert marked == [last["messages"][-1]["content"][-1]]


def test_a_small_window_is_cut_never_refused_and_cached() -> None:
    results = replay_all(turns=30, window=40_000, presets=["coding-agent"])
    whole, curated = results[WHOLE], results["coding-agent"]
    assert whole.rejected == curated.rejected == []
    assert curated.first_cut is not None
    assert max(curated.prompts) < max(whole.prompts)
    assert sum(curated.reads) > 0
    assert sum(curated.billed) < sum(whole.billed)
    # Cuts are rare and large: only they break the cache; every other turn writes just
    # the new step, as the whole session does.
    assert len(writes_above(curated, whole)) <= len(curated.prompts) // 4
    assert "| coding-agent |" in table(results)


def test_the_cli_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--turns", "6", "--window", "200000", "--presets", "chat"]) == 0
    out = capsys.readouterr().out
    assert "| whole | " in out
    assert "| chat | " in out
