"""context-curator's HTTP edge: serves clients, curates through `policies`, forwards upstream.

One folder per concern; a request crosses them in this order:
serving/        the ASGI app, its guard (keys, limits), routing, reload, the uvicorn runner
protocols/      the wire APIs curated (chat completions, ...): parse, rebuild, usage, assembly
curation/       protocol-neutral: parse through the protocol, run the route's policy, fail open
upstream/       the HTTP client behind a small interface, and the relay (streams included)
observability/  the exchange record, and what reads it: Prometheus metrics and the audit log
summarizing/    the summarizer's edge services: its model calls and its shared caches
config/         the config file, one module per section, validated at load
cli/            the `curator` command: serve, check, simulate, audit
types.py        the types that cross them (raw headers, an exchange's outcome, ASGI aliases)
"""
