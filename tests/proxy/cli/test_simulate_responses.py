"""`curator simulate` on Responses API requests: curated as the proxy would curate them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.cli.main import main
from tests import factories as f
from tests.fakes import responses_items as r

CONFIG = """\
upstreams:
  main: {base_url: "https://upstream.test/v1", api_key: sk-test}
models:
  "small-*": {context_window: 2000, encoding: o200k_base}
policies:
  agents:
    reserve_output_tokens: 200
    curators:
      - tool_result_truncation: {max_tokens: 100, keep_recent: 1}
      - token_budget: {}
      - tool_pair_coherence: {}
routes:
  - {name: agents, upstream: main, policy: agents}
"""


def responses_body(results: int = 3) -> dict[str, object]:
    items = [r.user("Fix the failing test.")]
    for k in range(results):
        items += [r.reasoning(k), r.function_call(f"c{k}")]
        items.append(r.function_output(f"c{k}", f.long_text(300, f"w{k}x")))
    items.append(r.user("What now?"))
    return {"model": "small-agent", "instructions": "You are a coding agent.", "input": items}


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *lines: object) -> tuple[int, str, str]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code = main(["simulate", "--config", str(config), str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_responses_request_is_curated_like_the_proxy_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(tmp_path, capsys, responses_body())
    assert (code, err) == (0, "")
    assert "request 1 (line 1): model small-agent, route agents, policy agents" in out
    assert "tool_result_truncation=2" in out


def test_a_responses_request_the_proxy_would_not_curate_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"model": "small-agent", "input": [r.user(), r.function_output("nowhere")]}
    code, _, err = run(tmp_path, capsys, body)
    assert code == 1
    assert (
        "requests.jsonl: a Responses request the proxy forwards uncurated: unpaired_output" in err
    )
