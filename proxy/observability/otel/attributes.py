"""An exchange's span attributes in the GenAI semantic conventions, and the proxy's own.

The response's model, id and finish reasons are read from the relayed body's last bytes
(`ExchangeRecord.tail`, kept for the usage anyway) with a few anchored scans, never a JSON
decode of a stream: this runs on the event loop for every traced request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.base import Usage
from proxy.serving.headers import actions_header

Attributes = dict[str, str | bool | int | float | list[str] | list[int]]

OPERATIONS = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "chat",
    "/v1/completions": "text_completion",
    "/v1/embeddings": "embeddings",
}
"""Request path -> `gen_ai.operation.name`; other paths get HTTP attributes only."""
PROVIDERS = (
    ("api.openai.com", "openai"),
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    ("api.anthropic.com", "anthropic"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("api.groq.com", "groq"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.deepseek.com", "deepseek"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.cohere.com", "cohere"),
    ("openrouter.ai", "openrouter"),
)
"""Upstream host (or host suffix) -> `gen_ai.provider.name`; any other host is named by its
upstream's name in the config (a vLLM or Ollama server has no well-known name)."""
RESPONSE_STATUSES = {"completed": "stop", "failed": "error", "cancelled": "cancelled"}

_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]{1,200})"')
_CHAT_ID = re.compile(rb'"id"\s*:\s*"(chatcmpl-[^"\\]{1,200})"')
_RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(resp_[^"\\]{1,200})"')
_FINISH = re.compile(rb'"finish_reason"\s*:\s*"([a-z_]{1,40})"')
_RESPONSE_OBJECT = re.compile(rb'"object"\s*:\s*"response"')
_STATUS = re.compile(rb'"status"\s*:\s*"([a-z_]{1,40})"')
_INCOMPLETE = re.compile(rb'"incomplete_details"\s*:\s*\{\s*"reason"\s*:\s*"([a-z_]{1,40})"')


def operation_name(record: ExchangeRecord) -> str | None:
    return OPERATIONS.get(record.path)


def provider_name(host: str | None, upstream: str | None) -> str:
    for known, name in PROVIDERS:
        if host is not None and (host == known or (known[0] == "." and host.endswith(known))):
            return name
    return upstream or "unknown"


def server(upstream_url: str | None) -> tuple[str | None, int | None]:
    """The upstream's host and port (the scheme's default port when none is written)."""
    if not upstream_url:
        return None, None
    parts = urlsplit(upstream_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port


def error_type(record: ExchangeRecord) -> str | None:
    """The proxy's error code, the outcome, or the upstream's status when it failed."""
    if record.error:
        return record.error
    if record.outcome != "ok":
        return record.outcome
    status = record.upstream_status or record.status
    return str(status) if status is not None and status >= 400 else None


def request_attributes(record: ExchangeRecord, upstream_url: str | None) -> Attributes:
    """What the request's span and the GenAI metrics say of it, before the response."""
    host, port = server(upstream_url)
    attributes: Attributes = {
        "gen_ai.provider.name": provider_name(host, record.upstream),
        "curator.request_id": record.id,
        "curator.path": record.path,
    }
    operation = operation_name(record)
    if operation is not None:
        attributes["gen_ai.operation.name"] = operation
    if record.model:
        attributes["gen_ai.request.model"] = record.model
    if host is not None and port is not None:
        attributes["server.address"], attributes["server.port"] = host, port
    error = error_type(record)
    if error is not None:
        attributes["error.type"] = error
    return attributes


def body_attributes(body: Mapping[str, object] | None) -> Attributes:
    """The request parameters the conventions name, as the client sent them."""
    if body is None:
        return {}
    out: Attributes = {}
    stream = body.get("stream")
    if isinstance(stream, bool):
        out["gen_ai.request.stream"] = stream
    for key in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out["gen_ai.request.max_tokens"] = value
            break
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[f"gen_ai.request.{key}"] = float(value)
    return out


def response_attributes(record: ExchangeRecord, usage: Usage | None) -> Attributes:
    """The response's model, id, finish reasons, usage and HTTP status."""
    out: Attributes = {}
    status = record.upstream_status or record.status
    if status is not None:
        out["http.response.status_code"] = status
    tail = record.tail
    if tail and (models := _MODEL.findall(tail)):
        out["gen_ai.response.model"] = models[-1].decode("utf-8", "replace")
    if tail:
        out.update(_response_facts(tail, record.path == "/v1/responses"))
    if usage is not None:
        out.update(usage_attributes(usage))
    return out


def usage_attributes(usage: Usage) -> Attributes:
    out: Attributes = {}
    pairs = (
        ("gen_ai.usage.input_tokens", usage.input_tokens),
        ("gen_ai.usage.output_tokens", usage.output_tokens),
        ("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens),
        ("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens),
    )
    for key, value in pairs:
        if value is not None:
            out[key] = value
    return out


def _response_facts(tail: bytes, responses: bool) -> Attributes:
    out: Attributes = {}
    if not responses:
        if found := _CHAT_ID.search(tail):
            out["gen_ai.response.id"] = found.group(1).decode("utf-8", "replace")
        reasons = list(dict.fromkeys(r.decode() for r in _FINISH.findall(tail)))
        if reasons:
            out["gen_ai.response.finish_reasons"] = reasons
        return out
    objects = list(_RESPONSE_OBJECT.finditer(tail))
    start = objects[-1].end() if objects else 0
    if found := _RESPONSE_ID.search(tail, max(0, start - 300)):
        out["gen_ai.response.id"] = found.group(1).decode("utf-8", "replace")
    status = _STATUS.search(tail, start) if objects else None
    if status is not None:
        word = status.group(1).decode()
        incomplete = _INCOMPLETE.search(tail, start)
        reason = incomplete.group(1).decode() if incomplete else RESPONSE_STATUSES.get(word, word)
        out["gen_ai.response.finish_reasons"] = [reason]
    return out


def curation_attributes(record: ExchangeRecord) -> Attributes:
    """The curation span's own attributes (`curator.*`)."""
    out: Attributes = {"curator.request_id": record.id}
    for key, value in (
        ("curator.route", record.route),
        ("curator.policy", record.policy),
        ("curator.mode", record.mode),
        ("curator.protocol", record.protocol.name if record.protocol else None),
        ("curator.skip_reason", record.skip_reason),
        ("curator.tokens_before", record.tokens_before),
        ("curator.tokens_after", record.tokens_after),
    ):
        if value is not None:
            out[key] = value
    if record.actions:
        out["curator.actions"] = actions_header(record.actions)
        removed: dict[str, int] = {}
        for action in record.actions:
            removed[action.curator] = removed.get(action.curator, 0) + action.tokens_removed
        out["curator.actions.curators"] = list(removed)
        out["curator.actions.tokens_removed"] = list(removed.values())
    out["curator.rescued"] = record.rescued is not None
    if record.rescued is not None and record.rescued.tokens_after is not None:
        out["curator.rescue.first_tokens_after"] = record.rescued.tokens_after
    return out
