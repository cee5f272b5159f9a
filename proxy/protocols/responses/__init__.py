"""The Responses API (`POST /v1/responses`): its input items as the curators' messages.

protocol.py  the `WireProtocol`: what is curated or skipped, rebuild, usage
kinds.py     which item types are calls, outputs, messages
parts.py     content parts <-> chat parts
items.py     items -> neutral messages, grouped so the curators' invariants keep them valid
rebuild.py   curated messages -> items, the client's own objects where nothing changed
facts.py     the budget's view of a body: model, output reserve, tools in chat shape
assembly.py  a relayed response (JSON or SSE events) as one message for the audit log
"""
