"""How much of a chat response body the audit log wants kept (the rest of the tap is usage)."""

from __future__ import annotations

from proxy.config.audit import AuditConfig
from proxy.observability.audit.entry import ERROR_TEXT_LIMIT
from proxy.observability.audit.sse import DEFAULT_MAX_BYTES


def audit_bytes(audit: AuditConfig, mode: str) -> int:
    """All of it (up to a cap); only what the audit stores of an error when it keeps no
    responses; nothing when the audit is off or the route's mode is `off`."""
    if not audit.enabled or mode == "off":
        return 0
    return DEFAULT_MAX_BYTES if audit.store_responses else ERROR_TEXT_LIMIT
