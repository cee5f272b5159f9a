"""Why each turn's cache missed, through the real proxy, held against the caching fake's own
ledger of what it re-billed and why (`tests.fakes.cache_ledger`).

One agent conversation, each turn scripted to miss for one reason: a client edit, a
curation cut (`tool_result_truncation` shortens a tool result once it is no longer the
newest), an expiry the fake simulates, a model switch; and one turn where the client and
curation both move the prefix. The client's own share of that turn is measured by replaying
the client's prompts straight to a second fake, with no proxy between.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.cli.main import main as curator
from proxy.config.loader import load_config
from proxy.observability.audit.readers.sqlite import SqliteReader
from tests import factories as f
from tests.e2e.test_audit import serving, wait_for_records
from tests.fakes.cache_ledger import Billed
from tests.fakes.caching import PromptCache
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

MODEL, OTHER = "gpt-4o", "gpt-4o-mini"
SLACK = 2 * 128
"""Our counts and the fake's rendering differ by a few tokens a message: two caching steps."""
SYSTEM = f.system("You review code. " + " ".join(f"rule{i} applies." for i in range(700)))


def result(n: int) -> str:
    return " ".join(f"line {n}-{i}: ok" for i in range(300))


def config_text(upstream: str) -> str:
    return f"""
upstreams:
  fake: {{base_url: "{upstream}/v1", read_timeout_s: 30}}
policies:
  agent:
    curators:
      - tool_result_truncation: {{max_tokens: 100, keep_recent: 1}}
routes:
  - {{name: default, upstream: fake, policy: agent}}
audit: {{path: audit.db}}
prices:
  "gpt-4o*": {{input: 2.5, cached_input: 1.25, output: 10.0}}
"""


Step = tuple[str, list[dict[str, Any]], Callable[[PromptCache], None] | None]


def turns() -> list[Step]:
    """(model, messages, what the fake does first) per turn, with the cause each is for."""
    ask = f.user("Review m.py.")
    history = [SYSTEM, ask, f.assistant_calls("c1"), f.tool_result("c1", result(1))]
    first = [SYSTEM, ask]
    held = history  # the newest tool result is kept whole: the prefix holds
    cut = [*held, f.assistant_calls("c2"), f.tool_result("c2", result(2))]  # c1 is cut now
    edited = [cut[0], f.user("Review m.py and n.py."), *cut[2:], f.user("go on")]
    expired = [*edited, f.assistant("ok"), f.user("more")]
    switched = [*expired, f.assistant("ok"), f.user("and? " + result(4)[:1200])]
    # both: the client rewrites its last question; the newest result c3 gets c2 cut
    both = [*switched[:-1], f.user("and then? " + result(5)[:1200]), f.assistant_calls("c3")]
    both.append(f.tool_result("c3", result(3)))
    return [
        (MODEL, first, None),  # first_turn
        (MODEL, held, None),  # none
        (MODEL, cut, None),  # curation
        (MODEL, edited, None),  # client
        (MODEL, expired, PromptCache.expire),  # expiry
        (OTHER, switched, None),  # model_change
        (OTHER, both, None),  # client and curation
    ]


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    proxied, direct = FakeOpenAI(cache=PromptCache()), FakeOpenAI(cache=PromptCache())
    with ServerThread(proxied.app) as a, ServerThread(direct.app) as b:
        proxied.origin, direct.origin = a.origin, b.origin
        yield proxied, direct


@pytest.fixture(scope="module")
def run(
    fakes: tuple[FakeOpenAI, FakeOpenAI], tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[Any], list[Billed], list[Billed], dict[str, float], Path]:
    """The conversation through the proxy (its audit records, the fake's ledger) and
    straight to the second fake (its ledger: what the client's own changes re-billed)."""
    proxied, direct = fakes
    folder: Path = tmp_path_factory.mktemp("attribution")
    (folder / "config.yaml").write_text(config_text(proxied.origin))
    headers = {"x-session-id": "review-1"}
    ids = []
    with serving(load_config(folder / "config.yaml")) as origin:
        with httpx.Client(timeout=30, headers=headers) as client:
            for model, messages, before in turns():
                for fake in (proxied, direct):
                    assert fake.cache is not None
                    if before is not None:
                        before(fake.cache)
                body = {"model": model, "messages": messages}
                response = client.post(origin + "/v1/chat/completions", json=body)
                assert response.status_code == 200, response.text
                ids.append(response.headers["x-curator-request-id"])
                assert client.post(direct.origin + "/v1/chat/completions", json=body).is_success
        wait_for_records(folder / "audit.db", ids)
        reader = SqliteReader(str(folder / "audit.db"))
        try:
            records = [reader.get(rid) for rid in ids]
        finally:
            reader.close()
        metrics = scrape_settled(origin, sum(r["cache"]["rebilled_tokens"] for r in records))
    assert proxied.cache is not None
    assert direct.cache is not None
    return records, proxied.cache.ledger, direct.cache.ledger, metrics, folder


def scrape_settled(origin: str, total: int) -> dict[str, float]:
    """`curator_cache_miss_tokens_total` by cause, once it counted `total` tokens (the
    writer's thread counts them a moment after it stored the records; bounded)."""
    found: dict[str, float] = {}
    for _ in range(200):
        text = httpx.get(origin + "/metrics").text
        found = {
            sample.labels["cause"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "curator_cache_miss_tokens_total"
        }
        if sum(found.values()) >= total:
            break
        time.sleep(0.025)
    return found


def test_each_turn_has_the_cause_it_was_scripted_for(run: Any) -> None:
    records, ledger, *_ = run
    causes = [r["cache"]["cause"] for r in records]
    assert causes == [
        "first_turn", "none", "curation", "client", "expiry", "model_change", "curation",
    ]  # fmt: skip
    assert [b.why for b in ledger] == [
        "first_turn", "none", "diverged", "diverged", "expired", "model_change", "diverged",
    ]  # fmt: skip


def test_the_diverging_element_is_where_the_fake_saw_the_prompt_part(run: Any) -> None:
    records, ledger, *_ = run
    for record, billed in zip(records, ledger, strict=True):
        if billed.why != "diverged":
            continue
        found = record["cache"]["upstream_at"]
        assert (found["element"], found["index"]) == billed.element, record["cache"]
    assert records[2]["cache"]["diverged_at"] == {
        "prompt": "curated",
        "element": "message",
        "index": 3,
    }
    assert records[3]["cache"]["diverged_at"] == {
        "prompt": "original",
        "element": "message",
        "index": 1,
    }


def test_re_billed_tokens_match_what_the_fake_re_billed_per_turn(run: Any) -> None:
    records, ledger, *_ = run
    for record, billed in zip(records, ledger, strict=True):
        cache = record["cache"]
        assert cache["reported"] == billed.cached
        assert cache["rebilled_tokens"] == pytest.approx(billed.rebilled, abs=SLACK), cache
    assert records[4]["cache"]["rebilled"] == {
        "expiry": pytest.approx(ledger[4].rebilled, abs=SLACK)
    }
    assert ledger[2].rebilled > 0
    assert records[2]["cache"]["rebilled"].keys() == {"curation"}


def test_curations_share_is_what_the_fake_re_billed_less_the_clients_own(run: Any) -> None:
    records, ledger, direct, *_ = run
    for record, proxied, alone in zip(records, ledger, direct, strict=True):
        if proxied.why != "diverged":
            continue
        rebilled = record["cache"]["rebilled"]
        expected = max(proxied.rebilled - alone.rebilled, 0)
        assert rebilled.get("curation", 0) == pytest.approx(expected, abs=SLACK), record["cache"]
    both = records[6]["cache"]
    assert both["rebilled"]["client"] > 0, both
    assert both["rebilled"]["curation"] > 0, both
    assert both["rebilled_usd"]["curation"] == pytest.approx(both["rebilled"]["curation"] * 1.25e-6)


def test_the_metric_counts_the_re_billed_tokens_by_cause(run: Any) -> None:
    records, _, _, metrics, _ = run
    totals = dict.fromkeys(("client", "curation", "expiry", "model_change"), 0.0)
    for record in records:
        for cause, tokens in record["cache"]["rebilled"].items():
            totals[cause] += tokens
    assert all(totals.values())
    assert metrics == totals


def test_report_cache_prints_each_turns_cause(run: Any, capsys: pytest.CaptureFixture[str]) -> None:
    records, *_, folder = run
    capsys.readouterr()
    args = ["report", "--cache", "--path", str(folder / "audit.db"), "--conversation", "review-1"]
    assert curator(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines[1:]] == [r["cache"]["cause"] for r in records]
    assert "curated message 3" in lines[3]
