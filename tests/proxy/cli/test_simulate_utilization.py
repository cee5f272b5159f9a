"""`curator simulate` reports how much of the budget each request was curated to use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.cli.main import main
from tests.factories import assistant_calls, long_text, system, tool_result, user
from tests.proxy.cli.test_simulate import CONFIG

# A 2,000-token window less the 200-token reply and a 20-token margin.
BUDGET = 1780


def over_budget_request() -> dict[str, object]:
    messages = [system("You are a coding agent."), user("Fix the failing test.")]
    for k in range(4):
        messages += [assistant_calls(f"c{k}"), tool_result(f"c{k}", long_text(500, f"w{k}x"))]
    return {"model": "small-agent", "messages": messages}


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(over_budget_request()))
    assert main(["simulate", "--config", str(config), str(request), *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_text_report_shows_the_budget_used_after_each_curator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(tmp_path, capsys)
    (line,) = [x for x in out.splitlines() if x.startswith("  budget use: ")]
    share, _, steps = line.removeprefix("  budget use: ").partition(" of the budget (after ")
    assert 85.0 <= float(share.rstrip("%")) <= 100.0
    names = [step.rsplit(" ", 1)[0] for step in steps.rstrip(")").split(", ")]
    assert names == ["tool_result_truncation", "token_budget"]
    assert steps.rstrip(")").endswith(f"token_budget {share}")
    assert f"  budget use of the 1 over-budget request(s): lowest {share}, median {share}" in out


def test_json_report_carries_the_utilization(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (request,) = json.loads(run(tmp_path, capsys, "--json"))["requests"]
    assert request["utilization"] == request["tokens_after"] / BUDGET
    assert 0.85 <= request["utilization"] <= 1.0
    by_curator = request["utilization_by_curator"]
    assert list(by_curator) == ["tool_result_truncation", "token_budget"]
    assert by_curator["tool_result_truncation"] > 1.0  # still over: the budget had to act
    assert by_curator["token_budget"] == request["utilization"]
