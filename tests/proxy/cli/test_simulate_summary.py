"""`curator simulate --summary` (totals per route and policy, no line per request) and
simulate reading its input as it goes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.cli.simulate_input import stream_requests
from tests.proxy.cli.test_simulate import CONFIG, conversation, simulate_cli, write


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    return path


def test_the_summary_adds_up_what_the_report_shows_per_request(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [conversation(), conversation(4), conversation(model="gpt-4o"), conversation(5)]
    path = str(write(tmp_path, "c.jsonl", *items))
    code, out, _ = simulate_cli(capsys, config_path, path, "--json")
    full = json.loads(out)
    code, out, _ = simulate_cli(capsys, config_path, path, "--json", "--summary")
    assert code == 0
    summary = json.loads(out)
    assert "requests" not in summary
    assert summary["total"]["requests"] == 4
    groups = {(g["route"], g["policy"]): g for g in summary["groups"]}
    assert sorted(groups) == [("agents", "agents"), ("default", "off")]
    agents = [r for r in full["requests"] if r["route"] == "agents"]
    assert groups["agents", "agents"]["requests"] == len(agents) == 3
    assert groups["agents", "agents"]["tokens_after"] == sum(r["tokens_after"] for r in agents)
    for side in ("original", "curated"):
        assert summary["total"][side]["cost"] == pytest.approx(full["total"][side]["cost"])
        by_request = sum(r["cost"][side]["cost"] for r in agents)
        assert groups["agents", "agents"][side]["cost"] == pytest.approx(by_request)
    code, text, _ = simulate_cli(capsys, config_path, path, "--summary")
    lines = text.splitlines()
    assert lines[2].split() == [
        "ROUTE", "POLICY", "REQS", "REJECTED", "SKIPPED", "BEFORE", "AFTER", "ORIGINAL",
        "CURATED", "SHARE",
    ]  # fmt: skip
    assert lines[3].split()[:3] == ["agents", "agents", "3"]
    assert not any(line.startswith("request ") for line in lines)
    assert "total: 4 request(s), 0 rejected, 0 skipped" in lines


def test_jsonl_is_read_a_line_at_a_time(tmp_path: Path) -> None:
    """A request is handed on before the lines after it are read: a bad line 3 is found
    only once the first two were simulated."""
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(conversation()) + "\n\n" + json.dumps(conversation()) + "\n{bad\n")
    requests = stream_requests(str(path))
    assert next(requests).line == 1
    assert next(requests).line == 3
    with pytest.raises(Exception, match=":4: invalid JSON"):
        next(requests)
