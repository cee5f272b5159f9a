"""`audit.spool`: on by default for postgres (beside the config file), its keys and bounds
validated with their key path, and refused for a sink that is not remote."""

from __future__ import annotations

from proxy.config.spool import DEFAULT_MAX_AGE_HOURS, DEFAULT_MAX_BYTES, SpoolConfig
from tests.proxy.config.test_audit import FILE, load, problems
from tests.proxy.config.test_audit_sinks import DSN


def test_postgres_gets_the_default_spool_beside_the_config() -> None:
    spool = load(f"audit: {{dsn: '{DSN}'}}").spool
    assert spool == SpoolConfig("/etc/curator/curator-audit-spool.db")
    assert (spool.max_bytes, spool.max_age_hours) == (DEFAULT_MAX_BYTES, DEFAULT_MAX_AGE_HOURS)
    assert DEFAULT_MAX_BYTES == 2**30
    assert spool.enabled


def test_its_keys_are_read_with_sizes_and_paths_resolved() -> None:
    text = f"audit: {{dsn: '{DSN}', spool: {{path: s/a.db, max_bytes: 10MB, max_age_hours: 2}}}}"
    assert load(text).spool == SpoolConfig("/etc/curator/s/a.db", 10_000_000, 2.0)
    off = load(f"audit: {{dsn: '{DSN}', spool: {{max_bytes: 0}}}}").spool
    assert off is not None
    assert not off.enabled


def test_local_sinks_have_no_spool_and_refuse_the_key() -> None:
    assert load("audit: {path: a.db}").spool is None
    assert problems("audit: {path: a.db, spool: {max_bytes: 1MB}}") == [
        f"{FILE}:1: audit.spool: applies to a remote store only (sink: postgres)"
    ]


def test_bad_values_name_their_key() -> None:
    found = problems(
        f"audit: {{dsn: '{DSN}', spool: {{max_bytes: lots, max_age_hours: -1, size: 1}}}}"
    )
    assert any("audit.spool.max_bytes: expected a size in bytes" in p for p in found), found
    assert any("audit.spool.max_age_hours: expected a number > 0" in p for p in found), found
    assert any("audit.spool.size: unknown key" in p for p in found), found
