"""Serving: the ASGI app and everything between the socket and curation (guard, routing,
reload, per-worker state, the uvicorn runner and its admin listener)."""
