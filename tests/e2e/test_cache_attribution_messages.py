"""Why each turn's cache missed on Anthropic's Messages API, where the client's breakpoints
decide what is cached: through the real proxy with the official `anthropic` SDK, held
against the strict fake's own ledger of what it re-billed and why
(`tests.fakes.anthropic_ledger`).

The client marks its breakpoints as Claude Code does: one on the system prompt's last
block, one moving with the newest message's last block. One agent conversation, each turn
scripted to miss for one reason: a client edit, a curation cut (`tool_result_truncation`
shortens a tool result once it is no longer the newest), an expiry the fake simulates, a
model switch; and one turn where the client and curation both move the prefix, where the
client's edit of its newest message loses all the moving breakpoint held, so curation's cut
before it costs nothing more. The client's own share is measured by replaying its requests
straight to a second fake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest

from proxy.config.limits import Limits
from proxy.config.loader import load_config
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.protocols.anthropic.neutral import INDEX, SYSTEM
from proxy.protocols.anthropic.protocol import ANTHROPIC
from tests.e2e.test_audit import serving, wait_for_records
from tests.fakes.anthropic_cache import MessagesCache
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.cache_ledger import Billed
from tests.fakes.servers import ServerThread

pytestmark = pytest.mark.e2e

MODEL, OTHER = "claude-sonnet-4-5", "claude-haiku-4-5"
MARK: Any = {"type": "ephemeral"}
SLACK = 128
"""Our counts (scaled by each turn's own ratio to the fake's) and the fake's differ by a
little: one caching step's worth of tokens."""
SYSTEM_PROMPT: Any = [
    {"type": "text", "text": "You review code."},
    {"type": "text", "text": " ".join(f"rule{i} applies." for i in range(700)),
     "cache_control": MARK},
]  # fmt: skip


def result(n: int) -> str:
    return " ".join(f"line {n}-{i}: ok" for i in range(300))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def call(k: str) -> dict[str, Any]:
    use = {"type": "tool_use", "id": k, "name": "read", "input": {"path": f"{k}.py"}}
    return {"role": "assistant", "content": [{"type": "text", "text": "Reading."}, use]}


def answer(k: str, text: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": k, "content": text}
    return {"role": "user", "content": [block]}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Claude Code's moving breakpoint: on the newest message's last block."""
    last = messages[-1]
    blocks = [*last["content"][:-1], {**last["content"][-1], "cache_control": MARK}]
    return [*messages[:-1], {**last, "content": blocks}]


def config_text(upstream: str) -> str:
    return f"""
upstreams:
  fake: {{base_url: "{upstream}", kind: anthropic, read_timeout_s: 30}}
policies:
  agent:
    curators:
      - tool_result_truncation: {{max_tokens: 100, keep_recent: 1}}
routes:
  - {{name: default, upstream: fake, policy: agent}}
audit: {{path: audit.db}}
"""


Step = tuple[str, list[dict[str, Any]], Callable[[MessagesCache], None] | None]


def turns() -> list[Step]:
    """(model, messages, what the fakes do first) per turn, with the cause each is for."""
    ask = user("Review m.py.")
    first = [ask]
    held = [ask, call("c1"), answer("c1", result(1))]  # the newest result is kept whole
    cut = [*held, call("c2"), answer("c2", result(2))]  # c1 is cut now
    edited = [user("Review m.py and n.py."), *cut[1:], user("go on")]
    expired = [*edited, said("ok"), user("more")]
    switched = [*expired, said("ok"), user("and? " + result(4)[:1200])]
    # both: the client rewrites its last question; the newest result c3 gets c2 cut. Only
    # the system's breakpoint wrote before the edit: the edit alone loses all the rest.
    both = [*switched[:-1], user("and then? " + result(5)[:1200]), call("c3")]
    both.append(answer("c3", result(3)))
    return [
        (MODEL, first, None),  # first_turn
        (MODEL, held, None),  # none
        (MODEL, cut, None),  # curation
        (MODEL, edited, None),  # client
        (MODEL, expired, MessagesCache.expire),  # expiry
        (OTHER, switched, None),  # model_change
        (OTHER, both, None),  # client, though curation moved the prefix first
    ]


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[FakeAnthropic, FakeAnthropic]]:
    proxied, direct = FakeAnthropic(), FakeAnthropic()
    with ServerThread(proxied.app) as a, ServerThread(direct.app) as b:
        proxied.origin, direct.origin = a.origin, b.origin  # type: ignore[attr-defined]
        yield proxied, direct


Run = tuple[list[Any], list[Billed], list[Billed], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def run(
    fakes: tuple[FakeAnthropic, FakeAnthropic], tmp_path_factory: pytest.TempPathFactory
) -> Run:
    """The conversation through the proxy (its audit records, the fake's ledger, the bodies
    the fake received) and straight to the second fake (its ledger)."""
    proxied, direct = fakes
    folder: Path = tmp_path_factory.mktemp("attribution_messages")
    (folder / "config.yaml").write_text(config_text(proxied.origin))  # type: ignore[attr-defined]
    headers = {"x-session-id": "review-1"}
    ids = []
    with serving(load_config(folder / "config.yaml")) as origin:
        through = anthropic.Anthropic(
            base_url=origin, api_key="sk-ant-x", max_retries=0, default_headers=headers
        )
        alone = anthropic.Anthropic(
            base_url=direct.origin,  # type: ignore[attr-defined]
            api_key="sk-ant-x",
            max_retries=0,
            default_headers=headers,
        )
        for model, messages, before in turns():
            for fake in (proxied, direct):
                if before is not None:
                    before(fake.cache)
            args: Any = {"model": model, "max_tokens": 64, "system": SYSTEM_PROMPT}
            raw = through.messages.with_raw_response.create(messages=marked(messages), **args)
            ids.append(raw.headers["x-curator-request-id"])
            alone.messages.create(messages=marked(messages), **args)
        wait_for_records(folder / "audit.db", ids)
        reader = SqliteReader(str(folder / "audit.db"))
        try:
            records = [reader.get(rid) for rid in ids]
        finally:
            reader.close()
    sent = [orjson.loads(r.body) for r in proxied.requests]
    return records, proxied.cache.ledger, direct.cache.ledger, sent


def test_each_turn_has_the_cause_it_was_scripted_for(run: Run) -> None:
    records, ledger, *_ = run
    assert [b.why for b in ledger] == [
        "first_turn", "none", "diverged", "diverged", "expired", "model_change", "diverged",
    ]  # fmt: skip
    assert [r["cache"]["cause"] for r in records] == [
        "first_turn", "none", "curation", "client", "expiry", "model_change", "client",
    ]  # fmt: skip


def test_the_reads_are_the_fakes_and_the_re_billed_tokens_its_own(run: Run) -> None:
    records, ledger, *_ = run
    for record, billed in zip(records, ledger, strict=True):
        cache = record["cache"]
        assert cache["reported"] == billed.cached, cache
        assert cache["rebilled_tokens"] == pytest.approx(billed.rebilled, abs=SLACK), cache
    assert ledger[2].rebilled > 0
    assert records[2]["cache"]["rebilled"].keys() == {"curation"}
    assert records[4]["cache"]["rebilled"].keys() == {"expiry"}


def test_the_diverging_element_is_where_the_fake_saw_the_request_part(run: Run) -> None:
    records, ledger, _, sent = run
    for record, billed, body in zip(records, ledger, sent, strict=True):
        if billed.why != "diverged":
            continue
        found = record["cache"]["upstream_at"]
        assert found["element"] == "message"
        wire = ANTHROPIC.parse(orjson.dumps(body), Limits())
        index = wire.messages[found["index"]][INDEX]
        assert billed.element == (("system", None) if index == SYSTEM else ("message", index))
    assert records[3]["cache"]["diverged_at"] == {
        "prompt": "original",
        "element": "message",
        "index": 1,
    }


def test_curations_share_is_what_the_fake_re_billed_less_the_clients_own(run: Run) -> None:
    records, ledger, direct, _ = run
    for record, proxied, alone in zip(records, ledger, direct, strict=True):
        if proxied.why != "diverged":
            continue
        rebilled = record["cache"]["rebilled"]
        expected = max(proxied.rebilled - alone.rebilled, 0)
        assert rebilled.get("curation", 0) == pytest.approx(expected, abs=SLACK), record["cache"]
    both = records[6]["cache"]
    assert both["upstream_at"]["index"] < both["client_at"]["index"], "curation parted first"
    assert ledger[6].rebilled < direct[6].rebilled, "the client alone lost more"
    assert both["rebilled"]["client"] > 20 * both["rebilled"].get("curation", 0), both


def test_a_re_billed_token_is_priced_as_written_again(run: Run) -> None:
    records, *_ = run
    cut = records[2]["cache"]
    # claude-sonnet-4-5: written at $3.75 a million, read at $0.30
    per_token = cut["rebilled_usd"]["curation"] / cut["rebilled"]["curation"]
    assert per_token == pytest.approx((3.75 - 0.30) / 1e6)
