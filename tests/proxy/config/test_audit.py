from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from policies.errors import ConfigError
from policies.validate import Problems, Reader
from policies.yamlsrc import parse
from proxy.config.audit import AuditConfig, RedactConfig, parse_audit, read_audit

FILE = "/etc/curator/config.yaml"


def load(yaml_text: str, file: str = FILE) -> AuditConfig:
    located = parse(textwrap.dedent(yaml_text), file)
    assert not located.problems
    return parse_audit(located.data.get("audit"), file=file, lines=located.lines)


def problems(yaml_text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(yaml_text)
    return [str(p) for p in caught.value.problems]


def test_the_documented_example() -> None:
    config = load(
        """
        audit:
          sink: sqlite
          path: curator-audit.db
          store_responses: true
          redact:
            builtin: true
            patterns:
              - {name: employee_id, regex: "EMP-[0-9]{6}"}
          max_queue: 10000
          cache_bytes: 32MiB
          max_age_days: 30
          max_bytes: 2GB
        """
    )
    assert config.sink == "sqlite"
    assert config.cache_bytes == 32 * 2**20
    assert config.path == "/etc/curator/curator-audit.db"
    assert config.store_responses is True
    assert config.redact.builtin is True
    assert [d.name for d in config.redact.patterns] == ["employee_id"]
    assert config.redact.patterns[0].pattern.fullmatch("EMP-123456")
    assert (config.max_queue, config.max_age_days, config.max_bytes) == (10000, 30, 2 * 10**9)
    assert config.enabled


def test_defaults_without_a_section() -> None:
    config = load("server: {port: 1}\n")
    assert config == AuditConfig(path="/etc/curator/curator-audit.db")
    assert config.redact == RedactConfig(builtin=True, patterns=())
    assert (config.max_age_days, config.max_bytes) == (None, None)


def test_jsonl_defaults_and_stdout() -> None:
    assert load("audit: {sink: jsonl}").path == "/etc/curator/curator-audit.jsonl"
    assert load("audit: {sink: jsonl, path: '-'}").path == "-"
    assert load("audit: {sink: jsonl, path: /var/log/a.jsonl}").path == "/var/log/a.jsonl"
    assert not load("audit: {sink: none}").enabled


def test_relative_to_the_config_folder_and_home(tmp_path: Path) -> None:
    config = load("audit: {path: logs/a.db}", file=str(tmp_path / "config.yaml"))
    assert config.path == str(tmp_path / "logs" / "a.db")
    home = load("audit: {path: ~/a.db}").path
    assert home == os.path.join(os.path.expanduser("~"), "a.db")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("500MB", 500 * 10**6), ("1GiB", 2**30), ("64 kb", 64000), ("1.5GB", 15 * 10**8)],
)
def test_sizes(text: str, expected: int) -> None:
    assert load(f"audit: {{max_bytes: '{text}'}}").max_bytes == expected
    assert load("audit: {max_bytes: 12345}").max_bytes == 12345


def test_the_message_cache_size_defaults_to_32_mib_and_may_be_zero() -> None:
    assert load("server: {port: 1}\n").cache_bytes == 32 * 2**20
    assert load("audit: {cache_bytes: 8MB}").cache_bytes == 8 * 10**6
    assert load("audit: {cache_bytes: 0}").cache_bytes == 0
    assert problems("audit: {cache_bytes: -1}") == [
        f"{FILE}:1: audit.cache_bytes: expected a size in bytes (e.g. 500000000 or '500MB'), "
        "got an integer -1"
    ]


def test_every_problem_is_reported_with_file_line_and_key_path() -> None:
    found = problems(
        """
        server: {port: 1}
        audit:
          sink: sqlit
          store_responses: "yes"
          redact:
            builtin: true
            patterns:
              - {name: employee_id, regex: "EMP-[0-9"}
              - {name: any, regex: ".*"}
              - {name: Bad Name, regex: "x"}
              - {name: employee_id, regex: "EMP2"}
              - {regex: "y"}
              - just a string
          max_queue: 0
          max_bytes: lots
          retention: 5
        """
    )
    assert found == [
        f"{FILE}:4: audit.sink: expected sqlite | jsonl | postgres | none, got a string 'sqlit'",
        f"{FILE}:5: audit.store_responses: expected true or false, got a string 'yes'",
        f"{FILE}:9: audit.redact.patterns[0].regex: invalid regular expression: "
        "unterminated character set at position 4",
        f"{FILE}:10: audit.redact.patterns[1].regex: can match the empty string; "
        "a pattern must match a secret",
        f"{FILE}:11: audit.redact.patterns[2].name: expected a letter, then lower-case letters, "
        "digits or _ (it is shown as [REDACTED:<name>]), got 'Bad Name'",
        f"{FILE}:12: audit.redact.patterns[3].name: duplicate name 'employee_id' "
        "(also patterns[0])",
        f"{FILE}:13: audit.redact.patterns[4]: missing required key 'name'",
        f"{FILE}:14: audit.redact.patterns[5]: expected a mapping, got a string 'just a string'",
        f"{FILE}:15: audit.max_queue: expected an integer from 1 to 10000000, got an integer 0",
        f"{FILE}:16: audit.max_bytes: expected a size in bytes (e.g. 500000000 or '500MB'), "
        "got a string 'lots'",
        f"{FILE}:17: audit.retention: unknown key 'retention'; did you mean 'retention_days'?",
    ]


def test_sink_specific_rules() -> None:
    assert problems("audit: {sink: sqlite, path: '-'}") == [
        f'{FILE}:1: audit.path: "-" (stdout) needs sink: jsonl'
    ]
    found = problems("audit:\n  sink: jsonl\n  max_age_days: 7\n  max_bytes: 1GB\n")
    assert found == [
        f"{FILE}:3: audit.max_age_days: retention applies to sink: sqlite, postgres only; "
        "rotate JSONL files with your log tooling",
        f"{FILE}:4: audit.max_bytes: retention applies to sink: sqlite only; "
        "rotate JSONL files with your log tooling",
    ]


def test_section_must_be_a_mapping() -> None:
    assert problems("audit: [sqlite]") == [f"{FILE}:1: audit: expected a mapping, got a list"]


def test_read_audit_reports_into_a_shared_reader() -> None:
    located = parse("audit: {max_queue: -1, unknown: 1}\n", FILE)
    shared = Problems(FILE, located.lines)
    config = read_audit(Reader(shared), located.data["audit"], ("audit",), base_dir=Path("/srv"))
    assert config.max_queue == 10000  # the invalid value falls back to the default
    assert config.path == "/srv/curator-audit.db"
    assert [p.path for p in shared.items] == ["audit.unknown", "audit.max_queue"]


def test_path_prefix_names_where_the_section_sits() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_audit({"sink": 3}, file="x.yaml", lines={}, path_prefix="profiles.prod.audit")
    assert (
        str(caught.value)
        == "x.yaml: profiles.prod.audit.sink: expected sqlite | jsonl | postgres | none, "
        "got an integer 3"
    )
