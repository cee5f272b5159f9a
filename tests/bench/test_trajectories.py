"""The trajectory benchmark: its reference extractor, its pricing, and a tiny replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import trajectories
from bench.references import Lookup, edit_lines, extract, message_text
from bench.trajectories import FULL, NAIVE, Run, Tally, replay_run, rows
from tests.factories import assistant_calls, call, long_text, system, tool_result, user

PATCH = """diff --git a/app/config.py b/app/config.py
--- a/app/config.py
+++ b/app/config.py
@@ -10,3 +10,3 @@ def load():
     settings = read_settings(path)
-    return settings.get("timeout", 30)
+    return settings.get("timeout", 60)
 # end
"""


def bash(k: int, command: str, output: str) -> list[dict[str, Any]]:
    return [
        assistant_calls(call(f"c{k}", "bash", {"command": command})),
        tool_result(f"c{k}", output),
    ]


def test_references_are_paths_identifiers_line_numbers_and_quoted_strings() -> None:
    msg = assistant_calls(
        call("a", "bash", {"command": "sed -n '120,140p' django/db/models/base.py"}),
        call("b", "str_replace", {"path": "x.py", "old_str": "    return get_FOO_display(self)"}),
        content="Now look at ModelBase in base.py line 88; the word default is prose.",
    )
    found = extract(msg)
    assert {"django/db/models/base.py", "base.py", "x.py"} <= found.paths
    assert {"get_FOO_display", "ModelBase"} <= found.identifiers
    assert "default" not in found.identifiers
    assert {"120", "140", "88"} <= found.lines
    assert "return get_FOO_display(self)" in found.quoted
    text = message_text(msg)
    assert "str_replace" in text
    assert "return get_FOO_display(self)" in text


def test_line_numbers_are_looked_up_as_whole_words() -> None:
    seen = Lookup("120: def f():\n1201 other")
    assert seen.has("lines", "120")
    assert not seen.has("lines", "12")
    assert seen.has("identifiers", "def f")


def test_edit_lines_are_the_removed_and_context_lines_of_the_patch() -> None:
    assert edit_lines(PATCH) == {
        "settings = read_settings(path)",
        'return settings.get("timeout", 30)',
    }
    assert edit_lines(None) == frozenset()


def write_run(folder: Path, steps: int) -> Path:
    messages: list[dict[str, Any]] = [system(), user("Fix the timeout in app/config.py.")]
    for k in range(steps):
        output = long_text(900, f"out{k}")
        if k == 1:
            output += '\n    return settings.get("timeout", 30)\n'
        messages += bash(k, f"cat app/config.py  # step {k}", output)
    messages.append(
        assistant_calls(call("z", "bash", {"command": "grep -n timeout app/config.py"}))
    )
    path = folder / "run.json"
    data = {"id": "tiny", "tools": [], "messages": messages, "edit_patch": PATCH}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_replay_prices_grades_and_never_rejects(tmp_path: Path) -> None:
    run = Run.load(write_run(tmp_path, 14))
    tallies = replay_run(run, 8_192, ["default", "coding-agent"], {})
    assert set(tallies) == {FULL, NAIVE, "default", "coding-agent"}
    full = tallies[FULL]
    assert full.requests == len(run.steps()) == 15
    assert full.rejected > 0
    assert full.over_window == full.rejected
    for name in (NAIVE, "default", "coding-agent"):
        assert tallies[name].rejected == 0, name
        assert tallies[name].tokens < full.tokens
    # The whole history re-reads its prefix from the cache: cached tokens billed at 10%.
    assert full.bill == pytest.approx(full.tokens - full.cached + 0.1 * full.cached)
    assert full.bill_writes > full.bill
    assert full.edit_seen > 0
    assert full.edit_lost == 0
    assert full.refs_lost == 0


def test_rows_are_shares_of_the_whole_history_and_the_naive_window() -> None:
    full = Tally(requests=2, tokens=1000, bill=500.0, bill_writes=600.0, refs=10)
    naive = Tally(requests=2, tokens=800, bill=1000.0, bill_writes=1200.0, refs=10, refs_lost=1)
    mine = Tally(requests=2, tokens=400, bill=250.0, bill_writes=300.0, refs=10, edit_seen=4)
    mine.edit_lost = 1
    found = {r.strategy: r for r in rows({32_768: {FULL: full, NAIVE: naive, "p": mine}})}
    assert (found["p"].tokens, found["p"].bill, found["p"].vs_naive) == (0.4, 0.5, 0.25)
    assert (found[NAIVE].refs_lost, found["p"].edit_lost) == (0.1, 0.25)
    total = Tally()
    total.add(mine)
    total.add(mine)
    assert (total.tokens, total.edit_lost) == (800, 2)


def test_main_prints_the_table_and_says_when_the_folder_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, 3)
    args = [str(tmp_path), "--windows", "8192", "--presets", "default", "--jobs", "1"]
    assert trajectories.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1 trajectories, 4 steps each window")
    assert [line.split()[1] for line in out[3:]] == ["whole", "naive", "default"]
    with pytest.raises(SystemExit):
        trajectories.main([str(tmp_path / "missing")])
    assert "no trajectories in" in capsys.readouterr().err
