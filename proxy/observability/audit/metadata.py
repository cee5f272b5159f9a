"""The fields of an audit record the proxy assigned itself (never client text, so never
redacted), and the audit's names for what an exchange was: its `kind`, its `mode`, the
response it keeps."""

from __future__ import annotations

from typing import Any

from proxy.observability.audit.capture import BodyCapture
from proxy.observability.audit.stamps import Stamps
from proxy.observability.exchange import ExchangeRecord
from proxy.observability.usage.audit_fields import spend_fields

SUMMARIZER = "summarizer"
"""The `kind` of a summarizer's model call; a curated request's is its protocol's name."""
Response = BodyCapture | bytes | str | None


def metadata(entry: ExchangeRecord, stamps: Stamps) -> dict[str, Any]:
    """The fields the proxy assigned itself: never client text, so never redacted."""
    ttfb = entry.ttfb_s
    return {
        "id": entry.id,
        "time": stamps.time(entry.started_at),
        "kind": audit_kind(entry),
        "parent_id": entry.parent_id,
        "route": entry.route,
        "policy": entry.policy,
        "mode": audit_mode(entry),
        "client": stamps.client(entry.authorization),
        "tokens_before": entry.tokens_before,
        "tokens_after": entry.tokens_after,
        "status": entry.status,
        "incomplete": entry.incomplete,
        "latency_ms": entry.latency_s * 1000,
        "ttfb_ms": ttfb * 1000 if ttfb is not None else None,
        "redaction": "ok",
        **spend_fields(entry.spend, entry.facts),
    }


def audit_kind(entry: ExchangeRecord) -> str:
    """The record's `kind`: its protocol's name, or `summarizer` for a summarizer's call."""
    if entry.subcall == "summary":
        return SUMMARIZER
    return entry.protocol.name if entry.protocol is not None else ""


def audit_mode(entry: ExchangeRecord) -> str:
    """How the proxy handled the request, as the audit log says it: `curated`, `skipped`,
    `shadow`, or for a call made on a request's behalf `summary` or `rescued`."""
    if entry.subcall is not None:
        return entry.subcall
    if entry.mode == "shadow":
        return "shadow"
    return "skipped" if entry.skip_reason is not None else "curated"


def audit_response(entry: ExchangeRecord) -> Response:
    """What the client got: the relayed body, or the proxy's own error code."""
    body = entry.response
    if body is not None and (not isinstance(body, BodyCapture) or body.size):
        return body
    if entry.error is not None and entry.status is not None and entry.status >= 400:
        return entry.error  # the proxy's own error (e.g. upstream_timeout): its code
    return None
