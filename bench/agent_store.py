"""A synthetic agent-scale audit store: agents of many turns whose requests grow to ~1.8M
tokens, written through the SQLite sink as the proxy's writer would (`bench.agent_scale`).

Each turn resends the whole history and adds a tool call and its result; the curated copy
keeps the pinned messages and the newest turns within ~100k tokens, all but the two newest
tool results cut to a head (a new message each, stored once, as `tool_result_truncation`
does). Text is drawn from a seeded vocabulary, so gzip finds what it would in real text,
not the runs of a repeated string. `million(path, n)` inserts small synthetic rows directly,
then fills their report columns as `curator audit migrate` would (`report_backfill`).
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from typing import Any

import orjson

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.message_cache import StoredMessage, message_digest
from proxy.observability.audit.sinks.report_backfill import backfill_postgres, backfill_sqlite
from proxy.observability.audit.sinks.sqlite import SqliteSink, connect_writer
from proxy.observability.audit.stamps import iso_time

CHARS_PER_TOKEN = 4
START = 1_767_225_600.0
TOOLS = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]
KEPT_TOKENS = 100_000


def _text(rng: random.Random, vocabulary: list[str], chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(vocabulary)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def _stored(message: dict[str, Any]) -> StoredMessage:
    data = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    return StoredMessage(message_digest(data), data)


def _tokens(messages: list[StoredMessage]) -> int:
    return sum(len(m.data or b"") for m in messages) // CHARS_PER_TOKEN


def conversation(agent: int, turns: int, final_tokens: int) -> Iterator[AuditRecord]:
    """One agent's records, a turn each, oldest first."""
    rng = random.Random(agent)
    vocabulary = [
        "".join(rng.choices("etaoinshrdlucmfwypvbgk", k=rng.randint(2, 9))) for _ in range(4000)
    ]
    chars = final_tokens * CHARS_PER_TOKEN // max(1, turns)
    history = [
        _stored({"role": "system", "content": f"agent {agent}: " + _text(rng, vocabulary, 4000)}),
        _stored({"role": "user", "content": _text(rng, vocabulary, 800)}),
    ]
    cut: dict[bytes, StoredMessage] = {}
    tools = _stored(TOOLS)  # type: ignore[arg-type]
    for turn in range(turns):
        call = {
            "id": f"a{agent}t{turn}",
            "type": "function",
            "function": {"name": "run", "arguments": "{}"},
        }
        history.append(_stored({"role": "assistant", "content": None, "tool_calls": [call]}))
        output = _text(rng, vocabulary, chars)
        history.append(_stored({"role": "tool", "tool_call_id": call["id"], "content": output}))
        curated = _curated(history, cut)
        when = START + agent * 86_400 + turn * 30
        yield AuditRecord(
            when,
            _fields(agent, turn, when, history, curated, tools),
            tuple(history),
            tuple(curated),
            tools,
        )


def _curated(history: list[StoredMessage], cut: dict[bytes, StoredMessage]) -> list[StoredMessage]:
    kept: list[StoredMessage] = []
    budget = KEPT_TOKENS * CHARS_PER_TOKEN
    for pair in range(len(history) - 2, 1, -2):  # newest (call, result) pairs first
        size = len(history[pair].data or b"") + len(history[pair + 1].data or b"")
        if budget < size and kept:
            break
        budget -= size
        result = history[pair + 1]
        if len(kept) >= 4:  # all but the two newest results: cut to a head
            result = cut.get(result.digest) or cut.setdefault(result.digest, _head(result))
        kept[:0] = [history[pair], result]
    return [*history[:2], *kept]


def _head(message: StoredMessage) -> StoredMessage:
    body = orjson.loads(message.data or b"{}")
    text = body["content"]
    return _stored({**body, "content": text[:2000] + f" [... {len(text) - 2000} chars removed]"})


def _fields(
    agent: int,
    turn: int,
    when: float,
    history: list[StoredMessage],
    curated: list[StoredMessage],
    tools: StoredMessage,
) -> dict[str, Any]:
    before, after = _tokens(history), _tokens(curated)
    return {
        "id": f"req-{agent}-{turn}",
        "time": iso_time(when),
        "kind": "chat",
        "route": "agents",
        "policy": "coding-agent",
        "mode": "curated",
        "model": "gpt-4o",
        "status": 200,
        "tokens_before": before,
        "tokens_after": after,
        "skip_reason": None,
        "actions": [{"curator": "token_budget", "kind": "drop", "tokens_removed": before - after}],
        "latency_ms": 900.0,
        "conversation": f"agent-{agent}",
        "usage": {"input": after, "cached": after * 9 // 10, "output": 120, "reasoning": 0},
        "cost": {
            "price": "gpt-4o*",
            "actual_usd": after * 2.5e-6,
            "uncurated_usd": before * 2.5e-6,
        },
        "context_window": 128_000,
        "encoding": "o200k_base",
        "tools_digest": tools.digest.hex(),
        "tools": orjson.Fragment(tools.data or b"null"),
    }


def write_store(path: str, agents: int, turns: int, final_tokens: int) -> int:
    """The store at `path`: `agents` conversations of `turns` records; how many written."""
    sink = SqliteSink(path)
    count = 0
    try:
        for agent in range(agents):
            for record in conversation(agent, turns, final_tokens):
                sink.write_many([record])
                count += 1
    finally:
        sink.close()
    return count


def million(path: str, records: int) -> None:
    """`records` small synthetic rows inserted directly (no messages): for the report."""
    sink = SqliteSink(path)
    sink.write_many([])
    sink.close()
    conn = sqlite3.connect(path)
    rows = (_row(n) for n in range(records))
    conn.executemany(
        "INSERT INTO records (time, id, kind, route, policy, model, status, original, fields) "
        "VALUES (?, ?, 'chat', ?, 'coding-agent', 'gpt-4o', 200, x'', ?)",
        rows,
    )
    conn.commit()
    conn.close()
    fill = connect_writer(path)
    try:
        backfill_sqlite(fill)  # the report columns, as `curator audit migrate` fills them
    finally:
        fill.close()


def _row(n: int) -> tuple[float, str, str, bytes]:
    when = START + n * 0.5
    route = ("agents", "chat", "batch")[n % 3]
    fields = {
        "id": f"m{n}", "time": iso_time(when), "kind": "chat", "route": route,
        "policy": "coding-agent", "model": "gpt-4o", "status": 200, "tokens_before": 9000 + n % 700,
        "tokens_after": 4000, "skip_reason": None, "conversation": f"c{n // 50}",
        "usage": {"input": 4000, "cached": 3000, "output": 90, "reasoning": 0},
        "cost": {"price": "gpt-4o*", "actual_usd": 0.004, "uncurated_usd": 0.009},
    }  # fmt: skip
    return when, f"m{n}", route, orjson.dumps(fields)


def million_postgres(dsn: str, records: int) -> None:
    """`million` in a PostgreSQL database (its schema made by the sink), by the server."""
    from proxy.observability.audit.sinks.postgres_writer import PostgresSink

    sink = PostgresSink(dsn)
    sink.prune()  # connects and migrates
    sink.close()
    import psycopg

    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO audit_records (uid, time, id, kind, route, policy, model, status, "
            "original, fields) SELECT decode(md5(n::text), 'hex'), %s + n * 0.5, 'm' || n, "
            "'chat', (ARRAY['agents', 'chat', 'batch'])[n %% 3 + 1], 'coding-agent', 'gpt-4o', "
            "200, '', convert_to(jsonb_build_object('id', 'm' || n, 'kind', 'chat', "
            "'route', (ARRAY['agents', 'chat', 'batch'])[n %% 3 + 1], 'tokens_before', "
            "9000 + n %% 700, 'tokens_after', 4000, 'skip_reason', null, 'conversation', "
            "'c' || n / 50, 'usage', jsonb_build_object('input', 4000, 'cached', 3000, "
            "'output', 90), 'cost', jsonb_build_object('price', 'gpt-4o*', 'actual_usd', "
            "0.004, 'uncurated_usd', 0.009))::text, 'UTF8') FROM generate_series(0, %s) AS n",
            (START, records - 1),
        )
        conn.commit()
        backfill_postgres(conn)
