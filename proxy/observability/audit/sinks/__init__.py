"""Audit sinks: where redacted records are written (SQLite by default, JSONL, PostgreSQL).

`base` says what a sink provides, `registry.SINKS` lists them; each other module is one
sink (the PostgreSQL one spans three: its registry entry, which needs no driver, the
writer and the schema, which need the `postgres` extra).
"""
