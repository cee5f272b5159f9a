"""The audit log: what each client sent and what the model saw, with secrets redacted.

The proxy fills an `AuditEntry` per request and hands it to `AuditWriter.submit`, which
never blocks; a background thread assembles the response, redacts, and writes to the
configured sink (SQLite by default, or JSONL). `open_audit` builds all of it from the
`audit:` config section; call it once per worker process.
"""
