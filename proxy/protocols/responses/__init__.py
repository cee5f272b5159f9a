"""The Responses API (`POST /v1/responses`): its input items as the curators' messages.

kinds.py    what each input item is to curation (message, call, output, reasoning, opaque)
parts.py    content parts <-> chat parts
items.py    items -> neutral messages, grouped so the curators' invariants keep them valid
rebuild.py  curated messages -> items, the client's own objects where nothing changed
request.py  reading a body: skip reasons, the budget's view of model, reserve and tools
"""
