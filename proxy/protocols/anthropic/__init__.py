"""Anthropic's Messages API (`POST /v1/messages`): its messages as the curators' messages.

protocol.py     the `WireProtocol`: what is curated or skipped, rebuild, usage
neutral.py      messages and blocks -> neutral chat messages, so the curators' invariants
                are Anthropic's rules
rebuild.py      curated neutral messages -> messages, the client's own objects where nothing
                changed
breakpoints.py  the client's `cache_control` breakpoints kept, or moved back (the rule)
facts.py        the budget's view of a body: model, output reserve, tools in chat shape
assembly.py     a relayed message (JSON or SSE events) as one message for the audit log
"""
