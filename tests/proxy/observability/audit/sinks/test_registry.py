"""The sink registry: a sink by its `audit.sink` name, a URL's scheme, or a key it owns."""

from __future__ import annotations

from proxy.observability.audit.sinks.registry import SINKS, by_scheme, owning


def test_every_sink_is_registered_by_name() -> None:
    assert set(SINKS) == {"sqlite", "jsonl", "postgres"}
    assert all(sink.name == name for name, sink in SINKS.items())


def test_a_url_scheme_selects_its_sink_and_a_path_none() -> None:
    found = by_scheme("postgresql://curator@db:5432/audit")
    assert found is not None
    assert found.name == "postgres"
    assert by_scheme("/var/lib/curator/audit.db") is None
    assert by_scheme("s3://bucket/audit") is None


def test_a_key_only_one_sink_reads_names_that_sink() -> None:
    found = owning({"dsn": "postgresql://db/audit", "retention_days": 30})
    assert found is not None
    assert found.name == "postgres"
    assert owning({"retention_days": 30}) is None
    assert owning(["dsn"]) is None  # only a mapping of keys counts
