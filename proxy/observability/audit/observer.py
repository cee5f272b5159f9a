"""The audit's reading of a finished exchange: `AuditObserver` submits a curated exchange's
one `ExchangeRecord` as it is (the audit's record is built from it by the writer,
`proxy.observability.audit.building`), plus a record of each model call made on its behalf:
a summarizer's (kind "summarizer") and an attempt an overflow rescue replaced, each linked
by `parent_id`. Those only reference what the request's record holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

import orjson

from proxy.errors import ProxyError
from proxy.observability.audit.writer import AuditWriter
from proxy.observability.exchange import ExchangeRecord, FirstAttempt, SummaryCall, new_id
from proxy.protocols.base import WireProtocol
from proxy.protocols.chat import CHAT


class AuditObserver:
    """Submits the records of a finished curated exchange (never blocks, never raises)."""

    __slots__ = ("_on_depth", "_writer")

    def __init__(self, writer: AuditWriter, on_depth: Callable[[int], None] | None) -> None:
        self._writer = writer
        self._on_depth = on_depth
        """Told the queue's depth after each exchange (the metrics' gauge)."""

    def __call__(self, record: ExchangeRecord) -> None:
        if record.protocol is None or record.mode == "off":
            return
        for call in record.summary_calls:
            self._writer.submit(summary_call(record, call))
        if record.rescued is not None:
            self._writer.submit(rejected_attempt(record, record.rescued))
        self._writer.submit(record)
        if self._on_depth is not None:
            self._on_depth(self._writer.queue_depth())


def rejected_attempt(record: ExchangeRecord, first: FirstAttempt) -> ExchangeRecord:
    """The attempt an overflow rescue replaced, linked to the request (mode `rescued`)."""
    return _on_behalf(
        record,
        "rescued",
        record.started_at,
        record.protocol or CHAT,
        upstream=record.upstream,
        model=record.model,
        original=record.original,
        keys=record.keys,
        curated=first.curated,
        actions=first.actions,
        tokens_before=record.tokens_before,
        tokens_after=first.tokens_after,
        status=400,
        response=first.error,
    )


def summary_call(record: ExchangeRecord, call: SummaryCall) -> ExchangeRecord:
    """A summarizer's model call, linked to the request it summarized for."""
    status, response = _call_outcome(call)
    return _on_behalf(
        record,
        "summary",
        call.started_at,
        CHAT,
        model=call.request.model,
        original=call.messages,
        status=status,
        latency_s=call.latency_s,
        response=response,
    )


def _on_behalf(
    record: ExchangeRecord,
    subcall: Literal["summary", "rescued"],
    started_at: float,
    protocol: WireProtocol,
    **fields: Any,
) -> ExchangeRecord:
    """A model call made on `record`'s behalf: its own id, the request's route, policy and
    client, linked to it by `parent_id`."""
    return ExchangeRecord(
        new_id(),
        started_at,
        "POST",
        protocol.path,
        route=record.route,
        protocol=protocol,
        policy=record.policy,
        authorization=record.authorization,
        parent_id=record.id,
        subcall=subcall,
        **fields,
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
