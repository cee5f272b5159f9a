"""The audit log: what each client sent and what the model saw, with secrets redacted.

The proxy hands each request's `ExchangeRecord` to `AuditWriter.submit`, which
never blocks; a background thread assembles the response, redacts, and writes to the
configured sink (SQLite by default, or JSONL). `configured.open_audit` builds all of it from
the `audit:` config section; call it once per worker process.
"""
