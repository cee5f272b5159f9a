"""Which reader opens an audit store: the named sink, else the URL scheme, else the suffix,
else SQLite; never the file's content."""

from __future__ import annotations

import pytest

from proxy.observability.audit.readers.registry import READERS, reader_for


@pytest.mark.parametrize(
    ("location", "sink", "expected"),
    [
        ("audit.db", None, "sqlite"),
        ("/var/lib/curator/audit", None, "sqlite"),
        ("audit.JSONL", None, "jsonl"),
        ("records.ndjson", None, "jsonl"),
        ("postgresql://u@db/curator", None, "postgres"),
        ("POSTGRES://u@db/curator", None, "postgres"),
        ("audit.db", "jsonl", "jsonl"),  # the config's sink wins over the suffix
    ],
)
def test_the_reader_is_chosen_by_name_scheme_or_suffix(
    location: str, sink: str | None, expected: str
) -> None:
    assert reader_for(location, sink).name == expected


def test_unknown_sinks_and_schemes_are_said() -> None:
    with pytest.raises(LookupError, match="no reader for sink 'kafka'"):
        reader_for("audit.db", "kafka")
    with pytest.raises(LookupError, match="s3://"):
        reader_for("s3://bucket/audit")


def test_every_reader_has_a_name_and_a_way_to_be_chosen() -> None:
    for name, reader in READERS.items():
        assert reader.name == name
        assert reader.schemes or reader.suffixes or name == "sqlite"
