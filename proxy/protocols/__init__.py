"""The wire APIs the proxy curates, one `WireProtocol` each (see `proxy.protocols.base`).

Adding one: a module (or folder) implementing `WireProtocol`, and one entry in `PROTOCOLS`.
Every other request under `/v1/` is relayed untouched.
"""

from __future__ import annotations

from proxy.protocols.anthropic.protocol import ANTHROPIC
from proxy.protocols.base import WireProtocol
from proxy.protocols.chat import CHAT
from proxy.protocols.responses.protocol import RESPONSES

PROTOCOLS: tuple[WireProtocol, ...] = (CHAT, RESPONSES, ANTHROPIC)


def protocol_for(method: str, path: str) -> WireProtocol | None:
    """The protocol curating `method path`, None when the request is only relayed."""
    for protocol in PROTOCOLS:  # a loop over a handful beats building a key per request
        if protocol.path == path and protocol.method == method:
            return protocol
    return None
