"""The `audit:` keys that depend on the sink registry: postgres and its DSN (never shown),
sinks implied by a URL or an owned key, retention_days and which sinks retain."""

from __future__ import annotations

from proxy.config.audit import masked_location
from tests.proxy.config.test_audit import FILE, load, problems

DSN = "postgresql://curator:s3cret@db.internal:5432/audit?sslmode=require"


def test_postgres_with_a_dsn() -> None:
    config = load(f"audit: {{sink: postgres, dsn: '{DSN}', retention_days: 14}}")
    assert (config.sink, config.path, config.max_age_days) == ("postgres", DSN, 14)
    assert config.options["connect_timeout_s"] == 5


def test_the_sink_is_implied_by_a_url_or_by_the_dsn_key() -> None:
    assert load(f"audit: {{path: '{DSN}'}}").sink == "postgres"
    assert load(f"audit: {{dsn: '{DSN}'}}").sink == "postgres"
    assert load("audit: {path: a.db}").sink == "sqlite"


def test_the_dsn_is_never_shown() -> None:
    config = load(f"audit: {{dsn: '{DSN}'}}")
    assert config.where == "postgresql://***@db.internal:5432/audit?sslmode=***"
    assert "s3cret" not in repr(config)
    assert masked_location("host=db password='a b' user=c") == "host=db password=*** user=c"
    assert masked_location("/var/lib/curator/audit.db") == "/var/lib/curator/audit.db"


def test_sink_rules() -> None:
    assert problems("audit: {sink: postgres}") == [
        f"{FILE}:1: audit.dsn: sink: postgres needs a connection string, e.g. "
        "dsn: ${CURATOR_AUDIT_DSN} (or path: postgresql://user@host/db)"
    ]
    assert problems(f"audit: {{dsn: '{DSN}', max_bytes: 1GB}}") == [
        f"{FILE}:1: audit.max_bytes: applies to sink: sqlite only; use retention_days here"
    ]
    assert problems(f"audit: {{sink: sqlite, dsn: '{DSN}'}}") == [
        f"{FILE}:1: audit.dsn: not a key of sink: sqlite"
    ]
    assert problems("audit: {sink: jsonl, path: 'postgresql://h/db'}") == [
        f"{FILE}:1: audit.path: sink: jsonl takes a file path, not this URL"
    ]


def test_retention_days_and_its_old_name() -> None:
    assert load("audit: {retention_days: 7}").max_age_days == 7
    assert load("audit: {max_age_days: 7}").max_age_days == 7
    assert problems("audit: {retention_days: 7, max_age_days: 7}") == [
        f"{FILE}:1: audit.max_age_days: the old name of retention_days: give only one of them"
    ]
