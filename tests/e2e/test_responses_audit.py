"""The audit log of Responses API exchanges through the real proxy: records of kind
`responses`, the output assembled from the SSE events, secrets in items redacted."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from proxy.config.loader import load_config
from tests.e2e.test_audit import audit_files, serving, show, wait_for_records, write_config
from tests.fakes import responses_items as r
from tests.fakes.upstream import Behavior, FakeOpenAI

pytestmark = pytest.mark.e2e

SECRET = "sk-proj-" + "Q7xv2LmN8pRt4KwZ9cYb3HdF6gJs1AeU5oIi0nMq"


def test_a_streamed_responses_exchange_is_audited_with_its_kind_and_output(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, fake.origin, audit="{path: audit.db}")
    items = [
        r.user("Deploy it."),
        r.reasoning(1),
        r.function_call("c1", "read_env"),
        r.function_output("c1", f"OPENAI_API_KEY={SECRET}"),
    ]
    body = {"model": "gpt-4o", "instructions": "Be careful.", "input": items, "stream": True}
    fake.queue(Behavior(reply="Deployed to staging."))
    with serving(load_config(path)) as origin:
        response = httpx.post(origin + "/v1/responses", json=body, timeout=30)
        assert response.status_code == 200
        rid = response.headers["x-curator-request-id"]
        wait_for_records(tmp_path / "audit.db", [rid])
    record = show(capsys, "show", rid, "--json", "--config", str(path))
    assert record["kind"] == "responses"
    assert record["response"]["text"] == "Deployed to staging."
    assert record["tokens_before"] == int(response.headers["x-curator-tokens-before"])
    assert [m["role"] for m in record["original"]] == ["system", "user", "assistant", "tool"]
    assert SECRET not in str(record)
    assert SECRET.encode() not in audit_files(tmp_path)
