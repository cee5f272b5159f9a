"""Issue U item 5 on a real `curator serve`: the uncurated-cost prefix caches are bounded in
bytes (`counterfactual.MAX_BYTES`), so requests of thousands of one-character messages, each
a conversation of its own, leave the server's RSS within `RSS_BOUND_KB` of idle.

Scaled down from the report (600 requests of 9,999 messages: 84 MB -> 1.18 GB): 72 of them
add ~37 MB here with the cap, ~132 MB without it (each conversation's 9,999 prefix nodes
kept, ~1.8 MB a request).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
import pytest

from tests.hardening.served import Served, serving
from tests.hardening.support import CHAT, upstream_server
from tests.hardening.upstreams import Quick

REQUESTS = 72
MESSAGES = 9_999
CLIENTS = 3
"""Requests in flight at once: the server's loop, curation and spend threads overlap."""
RSS_BOUND_KB = 100 << 10
"""The issue's bound on what the attack may leave behind."""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with upstream_server(Quick()) as upstream:
        config = tmp_path / "config.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                upstreams:
                  quick: {{base_url: "{upstream.origin}/v1"}}
                policies:
                  budget: {{curators: [{{token_budget: {{}}}}]}}
                routes:
                  - {{name: default, upstream: quick, policy: budget}}
                audit: {{sink: none}}
                """
            )
        )
        with serving(config) as running:
            yield running


def _tiny_messages(conversation: int) -> bytes:
    """A conversation of its own (its first message), then one-character messages."""
    first = {"role": "user", "content": f"conversation {conversation}"}
    rest = [{"role": "user", "content": "x"}] * (MESSAGES - 1)
    return orjson.dumps({"model": "gpt-4o", "messages": [first, *rest]})


def test_many_tiny_messages_leave_rss_within_the_bound(served: Served) -> None:
    with httpx.Client(base_url=served.origin, timeout=60) as http:

        def post(body: bytes) -> int:
            return http.post(CHAT, content=body).status_code

        assert post(_tiny_messages(-1)) == 200  # warm: tokenizer, caches, first allocations
        idle = served.settled_rss_kb()
        bodies = [_tiny_messages(k) for k in range(REQUESTS)]
        with ThreadPoolExecutor(CLIENTS) as pool:
            statuses = list(pool.map(post, bodies))
    assert statuses == [200] * REQUESTS
    grown = served.settled_rss_kb() - idle  # once the spend thread has caught up
    assert grown < RSS_BOUND_KB, f"+{grown >> 10} MB over idle ({idle >> 10} MB)"
