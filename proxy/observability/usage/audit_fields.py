"""What the audit record keeps of a chat exchange's spend and budget inputs.

Enough to reproduce the request's curation offline (`curator simulate` reads these back):
the output limits the client asked for, the window and encoding the proxy resolved, and
the tool definitions. Plus what it cost: the upstream's usage and the money.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.pricing import Usage
from proxy.observability.usage.spend import Spend

OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
KEYS = (
    "conversation", "usage", "cost", "cache", *OUTPUT_LIMITS, "context_window", "encoding",
)  # fmt: skip
"""Fields the proxy assigns itself (never client text). `tools` is client text, redacted,
and `tools_digest` its key: the audit's record builder sets both."""


def spend_fields(spend: Spend | None, body: Mapping[str, Any] | None) -> dict[str, Any]:
    """The audit fields for `KEYS` (all present, None when unknown)."""
    fields: dict[str, Any] = dict.fromkeys(KEYS)
    if body is not None:
        for key in OUTPUT_LIMITS:
            value = body.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                fields[key] = value
    if spend is None:
        return fields
    # In the audit writer's thread: where the deferred counterfactual may be computed.
    counterfactual = spend.counterfactual()
    # Without a session id, the writer fills in the stored messages' key (`stored_key`).
    fields["conversation"] = counterfactual.session
    fields["usage"] = _usage(spend.usage)
    fields["context_window"] = counterfactual.context_window
    fields["encoding"] = counterfactual.encoding
    if counterfactual.cache is not None:
        fields["cache"] = counterfactual.cache.as_json(counterfactual.rebill_usd)
    if spend.actual_usd is not None:
        fields["cost"] = {
            "price": spend.price_model,
            "actual_usd": spend.actual_usd,
            "uncurated_usd": counterfactual.uncurated_usd,
            "uncurated": _usage(counterfactual.uncurated),
        }
        if counterfactual.estimate is not None and counterfactual.range_usd is not None:
            found = counterfactual.estimate
            fields["cost"]["uncurated_estimate"] = {
                "reason": found.reason,
                "learned": found.learned,
                "input_range": [found.low, found.high],
                "usd_range": list(counterfactual.range_usd),
            }
    return fields


def tools_of(body: Mapping[str, Any] | None) -> list[Any] | None:
    """The request's tool definitions as sent (`tools`, else legacy `functions` wrapped)."""
    if body is None:
        return None
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        return tools
    functions = body.get("functions")
    if isinstance(functions, list) and functions:
        return [{"type": "function", "function": f} for f in functions]
    return None


def _usage(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "input": usage.input,
        "cached": usage.cached,
        "output": usage.output,
        "reasoning": usage.reasoning,
        "cache_write": usage.written,
        "cache_write_1h": usage.written_1h,
    }
