"""The audit's reading of a finished exchange: `AuditObserver` turns a curated exchange's
one `ExchangeRecord` into its audit entry (its `kind` the protocol's name), plus one per
model call a summarizer made for it (kind "summarizer", linked by `parent_id`) and one for
an attempt an overflow rescue replaced. An entry only references what the record holds;
copying, assembling, redacting and writing happen in the writer thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson

from proxy.errors import ProxyError
from proxy.observability.audit.entry import SUMMARIZER, AuditEntry
from proxy.observability.audit.writer import AuditWriter
from proxy.observability.exchange import ExchangeRecord, FirstAttempt, SummaryCall, new_id
from proxy.protocols.chat import CHAT


class AuditObserver:
    """Submits the audit entries of a finished curated exchange (never blocks, never raises)."""

    __slots__ = ("_on_depth", "_writer")

    def __init__(self, writer: AuditWriter, on_depth: Callable[[int], None] | None) -> None:
        self._writer = writer
        self._on_depth = on_depth
        """Told the queue's depth after each exchange (the metrics' gauge)."""

    def __call__(self, record: ExchangeRecord) -> None:
        if record.protocol is None or record.mode == "off":
            return
        for call in record.summary_calls:
            self._writer.submit(summary_entry(record, call))
        if record.rescued is not None:
            self._writer.submit(rejected_attempt_entry(record, record.rescued))
        self._writer.submit(exchange_entry(record))
        if self._on_depth is not None:
            self._on_depth(self._writer.queue_depth())


def exchange_entry(record: ExchangeRecord) -> AuditEntry:
    """The audit entry of a curated request: what the client sent, what the model saw, the
    reply."""
    original = record.original if record.original is not None else ()
    curated = record.curated if record.curated is not record.original else None
    return AuditEntry(
        id=record.id,
        time=record.started_at,
        kind=record.protocol.name if record.protocol is not None else "",
        protocol=record.protocol or CHAT,
        route=record.route,
        policy=record.policy,
        mode=_audit_mode(record),
        model=record.model,
        authorization=record.authorization,
        original=original,
        curated=curated,
        actions=record.actions,
        tokens_before=record.tokens_before,
        tokens_after=record.tokens_after,
        skip_reason=record.skip_reason,
        status=record.status,
        latency_ms=record.latency_s * 1000,
        ttfb_ms=record.ttfb_s * 1000 if record.ttfb_s is not None else None,
        response=_response(record),
        incomplete=record.incomplete,
        spend=record.spend,
        body=record.facts,
    )


def rejected_attempt_entry(record: ExchangeRecord, first: FirstAttempt) -> AuditEntry:
    """The attempt an overflow rescue replaced, linked to the request (mode `rescued`)."""
    return AuditEntry(
        id=new_id(),
        time=record.started_at,
        kind=record.protocol.name if record.protocol is not None else "",
        parent_id=record.id,
        protocol=record.protocol or CHAT,
        route=record.route,
        policy=record.policy,
        mode="rescued",
        model=record.model,
        authorization=record.authorization,
        original=record.original if record.original is not None else (),
        curated=first.curated,
        actions=first.actions,
        tokens_before=record.tokens_before,
        tokens_after=first.tokens_after,
        status=400,
        response=first.error,
    )


def _audit_mode(record: ExchangeRecord) -> str:
    """How the proxy handled the request, as the audit log says it."""
    if record.mode == "shadow":
        return "shadow"
    return "skipped" if record.skip_reason is not None else "curated"


def _response(record: ExchangeRecord) -> Any:
    if record.response is not None and record.response.size:
        return record.response
    if record.error is not None and record.status is not None and record.status >= 400:
        return record.error  # the proxy's own error (e.g. upstream_timeout): its code
    return None


def summary_entry(record: ExchangeRecord, call: SummaryCall) -> AuditEntry:
    """A summarizer's model call, linked to the request it summarized for."""
    status, response = _call_outcome(call)
    return AuditEntry(
        id=new_id(),
        time=call.started_at,
        kind=SUMMARIZER,
        parent_id=record.id,
        route=record.route,
        policy=record.policy,
        mode="summary",
        model=call.request.model,
        authorization=record.authorization,
        original=call.messages,
        status=status,
        latency_ms=call.latency_s * 1000,
        response=response,
    )


def _call_outcome(call: SummaryCall) -> tuple[int, bytes | str]:
    """The call's status and answer, the answer in chat.completion shape so usage is kept."""
    if call.completion is not None:
        completion = call.completion
        body = {
            "object": "chat.completion",
            "model": call.request.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": completion.text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "total_tokens": completion.prompt_tokens + completion.completion_tokens,
            },
        }
        return 200, orjson.dumps(body)
    error = call.error
    if isinstance(error, ProxyError):
        return error.status, error.code
    if isinstance(error, TimeoutError | asyncio.CancelledError):
        return 504, "the summary call timed out"
    return 502, f"{type(error).__name__}: {error}"
