"""A route without curators (`preset:passthrough`, a client using the proxy for its audit
only) still says why each turn's cache missed, held against the caching fake's ledger;
its uncurated cost stays the actual one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.config.loader import load_config
from proxy.observability.audit.readers.sqlite import SqliteReader
from tests import factories as f
from tests.e2e.test_audit import serving, wait_for_records
from tests.fakes.caching import PromptCache
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

SYSTEM = f.system("You review code. " + " ".join(f"rule{i} applies." for i in range(700)))


def test_a_passthrough_route_is_attributed(tmp_path: Path) -> None:
    fake = FakeOpenAI(cache=PromptCache())
    ask = f.user("Review m.py.")
    first = [SYSTEM, ask, f.assistant("ok " * 300), f.user("next")]
    edited = [SYSTEM, f.user("Review n.py."), *first[2:], f.user("more")]
    turns: list[tuple[str, list[dict[str, Any]]]] = [
        ("gpt-4o", first),
        ("gpt-4o", edited),  # client
        ("gpt-4o", [*edited, f.assistant("ok"), f.user("go")]),  # expiry
        ("gpt-4o-mini", [*edited, f.assistant("ok"), f.user("go"), f.user("?")]),  # model
        ("gpt-4o", [f.user("Hi.")]),  # too small for any cache: not attributed
    ]
    with ServerThread(fake.app) as upstream:
        (tmp_path / "config.yaml").write_text(
            f'upstreams:\n  fake: {{base_url: "{upstream.origin}/v1"}}\n'
            "policies:\n  pass: preset:passthrough\n"
            "routes:\n  - {name: default, upstream: fake, policy: pass}\n"
            "audit: {path: audit.db}\n"
            'prices:\n  "gpt-4o*": {input: 2.5, cached_input: 1.25, output: 10}\n'
        )
        ids = []
        with serving(load_config(tmp_path / "config.yaml")) as origin:
            with httpx.Client(timeout=30, headers={"x-session-id": "audit-only"}) as client:
                for n, (model, messages) in enumerate(turns):
                    assert fake.cache is not None
                    if n == 2:
                        fake.cache.expire()
                    body = {"model": model, "messages": messages}
                    answer = client.post(origin + "/v1/chat/completions", json=body)
                    assert answer.status_code == 200, answer.text
                    ids.append(answer.headers["x-curator-request-id"])
            wait_for_records(tmp_path / "audit.db", ids)
    reader = SqliteReader(str(tmp_path / "audit.db"))
    try:
        records = [reader.get(rid) for rid in ids]
    finally:
        reader.close()
    assert fake.cache is not None
    assert [b.why for b in fake.cache.ledger][:4] == [
        "first_turn",
        "diverged",
        "expired",
        "model_change",
    ]
    causes = [(r.get("cache") or {}).get("cause") for r in records]
    assert causes == ["first_turn", "client", "expiry", "model_change", None]
    for record, billed in zip(records[1:4], fake.cache.ledger[1:4], strict=True):
        assert record["cache"]["rebilled_tokens"] == pytest.approx(billed.rebilled, abs=256)
    for record in records:
        assert record["cost"]["uncurated_usd"] == record["cost"]["actual_usd"]
