"""Docs that cannot drift from the code.

- Every key the config loader accepts (`tests.config_schema`, read off the loader itself)
  is in config.example.yaml, commented out or not, and in README's configuration reference;
  every key either of them names is one the loader accepts.
- Every metric family `/metrics` exports is in README's metrics table, and every
  `curator_*` metric README names is exported.
- Every ```yaml block in README.md parses; every one that is a whole config passes
  `curator check`.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from starlette.testclient import TestClient

from proxy.cli.main import main
from proxy.config.audit import AuditConfig
from proxy.config.loader import SECTIONS, default_config
from proxy.observability.metrics.labels import KNOWN_SKIPS
from proxy.serving.app import create_app
from tests.config_schema import Schema, accepted_keys
from tests.deploy import metric_families

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
EXAMPLE = (ROOT / "config.example.yaml").read_text()


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> Schema:
    return accepted_keys(tmp_path_factory.mktemp("schema"))


def _appears(key: str, documented: set[str]) -> bool:
    """`key` itself, or a key under it (`audit` appears when `audit.sink` does)."""
    return key in documented or any(d.startswith((f"{key}.", f"{key}[]")) for d in documented)


def _unknown(documented: set[str], schema: Schema) -> list[str]:
    names = {f"{named}.*" for named in schema.named}
    return sorted(documented - schema.keys - names)


def test_the_loaders_keys_are_found(schema: Schema) -> None:
    """The walk reaches nested mappings, lists and mappings of names (else the tests below
    would check nothing)."""
    for key in ("server.port", "upstreams.*.base_url", "routes[].match.headers"):
        assert key in schema.keys
    assert {"audit.redact.patterns[].regex", "audit.dsn", "server.max_body_mb"} <= schema.keys
    assert {"upstreams", "models", "prices", "policies"} <= schema.named
    assert not any(key.startswith("policies.") for key in schema.keys)


# config.example.yaml

_COMMENT = re.compile(r"^(?P<lead>\s*)# (?P<body>.*)$")
_KEY = re.compile(r'^ *(?:- )?(?:[A-Za-z_][\w-]*|"[^"]*"):(?: |$)')


def uncommented(text: str) -> str:
    """`text` with its commented-out YAML put back: a comment `# key: ...` (after any
    indentation), and the comment lines indented deeper right below it."""
    lines: list[str] = []
    run: int | None = None  # the depth of the commented key being put back
    for line in text.splitlines():
        match = _COMMENT.match(line)
        if match is None:
            run = None
            lines.append(line)
            continue
        body = match["body"]
        depth = len(match["lead"]) + len(body) - len(body.lstrip(" "))
        is_key = _KEY.match(body) is not None
        if is_key or (run is not None and depth > run):
            if run is None or depth <= run:
                run = depth
            lines.append(match["lead"] + body)
        else:
            run = None
            lines.append(line)
    return "\n".join(lines) + "\n"


class _MergingLoader(yaml.SafeLoader):
    """A key given twice (a section and its commented-out alternative) keeps both's keys."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:  # noqa: ARG002
        # Always deep: a value is merged as soon as it is built, so it must be complete.
        merged: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            merged[key] = _merge(merged.get(key), self.construct_object(value_node, deep=True))
        return merged


def _merge(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **{k: _merge(old.get(k), v) for k, v in new.items()}}
    return new


def key_paths(data: Any, schema: Schema) -> set[str]:
    """Every key of a config tree, as the schema writes them (a policy's own keys left out)."""
    found: set[str] = set()

    def walk(node: Any, path: tuple[str | int, ...]) -> None:
        # Keys as strings: YAML reads a policy named `off` as the boolean false.
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            here = (*path, str(key) if isinstance(node, dict) else key)
            if isinstance(node, dict):
                found.add(schema.canonical(here))
            if isinstance(value, dict | list) and schema.canonical(here) != "policies.*":
                walk(value, here)

    walk(data, ())
    return found


def _example_keys(schema: Schema) -> set[str]:
    return key_paths(yaml.load(uncommented(EXAMPLE), Loader=_MergingLoader), schema)


def test_uncommenting_puts_back_only_yaml() -> None:
    text = "# Some prose: no key\n# a:\n#   b: 1\n#   - c\n  # d: 2\n# more prose\n"
    assert uncommented(text) == "# Some prose: no key\na:\n  b: 1\n  - c\n  d: 2\n# more prose\n"


def test_every_accepted_key_is_in_the_example(schema: Schema) -> None:
    documented = _example_keys(schema)
    missing = sorted(key for key in schema.keys if not _appears(key, documented))
    assert not missing, f"config.example.yaml lacks {missing}: show each, commented"


def test_every_key_in_the_example_is_accepted(schema: Schema) -> None:
    assert not _unknown(_example_keys(schema), schema)


# README.md's configuration reference: the table's first column


def reference_keys(readme: str) -> set[str]:
    """The keys of the reference table; `a.b.c`, `d` names `a.b.c` and `a.b.d`."""
    section = readme.split("\n## Configuration reference\n", 1)[1].split("\n#", 1)[0]
    found: set[str] = set()
    for row in re.findall(r"^\| (`.*?) \|", section, flags=re.MULTILINE):
        previous = ""
        for name in re.findall(r"`([^`]+)`", row):
            key = re.sub(r"<[^>]+>", "*", name)
            if "." not in key and previous:
                key = f"{previous.rsplit('.', 1)[0]}.{key}"
            found.add(key)
            previous = key
    return found


def test_reference_keys_are_read_from_the_table() -> None:
    readme = "\n## Configuration reference\n| key |\n|---|\n| `a.<n>.b`, `c` | `d` |\n## Next\n"
    assert reference_keys(readme) == {"a.*.b", "a.*.c"}


def test_every_accepted_key_is_in_the_readme_reference(schema: Schema) -> None:
    documented = reference_keys(README)
    missing = sorted(key for key in schema.keys if not _appears(key, documented))
    assert not missing, f"README's configuration reference lacks {missing}"


def test_every_key_in_the_readme_reference_is_accepted(schema: Schema) -> None:
    assert not _unknown(reference_keys(README), schema)


# README.md's metrics: the table in "## Metrics", and every `curator_*` name anywhere

SAMPLE_SUFFIXES = ("_bucket", "_sum", "_count", "_created")


@pytest.fixture(scope="module")
def exported() -> set[str]:
    """The families a freshly built app's GET /metrics exports."""
    config = dataclasses.replace(default_config({}), audit=AuditConfig(sink="none"))
    transport = httpx.MockTransport(lambda _request: httpx.Response(404))
    with TestClient(create_app(config, transport, watch_interval_s=None)) as client:
        text = client.get("/metrics").text
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE))
    # prometheus-client adds a `<name>_created` gauge beside each counter and histogram.
    bases = {n.removesuffix("_total") for n, t in types.items() if t in ("counter", "histogram")}
    return set(types) - {f"{base}_created" for base in bases}


def metrics_table(readme: str) -> set[str]:
    section = readme.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(curator_\w+)` \|", section, flags=re.MULTILINE))


def named_metrics(readme: str) -> set[str]:
    """Every `curator_*` name, less the skip reason `curator_error` and its like."""
    names = set(re.findall(r"\bcurator_[a-z_]*[a-z]\b", readme))
    return names - KNOWN_SKIPS


def test_the_metrics_table_is_read_from_the_readme() -> None:
    assert metrics_table("\n## Metrics\n| `curator_a_total` | counter |\n## Next\n") == {
        "curator_a_total"
    }


def test_every_exported_family_is_in_the_readme_table(exported: set[str]) -> None:
    assert {"curator_requests_total", "curator_curation_seconds"} <= exported
    missing = sorted(exported - metrics_table(README))
    assert not missing, f"README's metrics table lacks {missing}"


def test_every_metric_the_readme_names_is_exported(exported: set[str]) -> None:
    def family(name: str) -> str:
        base = next((name.removesuffix(s) for s in SAMPLE_SUFFIXES if name.endswith(s)), name)
        return base if base in exported else name

    unknown = sorted(name for name in named_metrics(README) if family(name) not in exported)
    assert not unknown, f"README names metrics /metrics does not export: {unknown}"


def test_the_labels_the_readme_gives_a_metric_are_its_own() -> None:
    """`curator_x_total{label="..."}`: each label is one deploy/metrics.txt lists for it
    (tests/deploy/test_metrics_list.py keeps that list to what the app exports)."""
    families = metric_families()
    wrong = [
        f"{name}{{{label}}}"
        for name, labels in re.findall(r"\b(curator_\w+)\{([^}]*)\}", README)
        for label in re.findall(r"(\w+)=", labels)
        if label not in families[name].labels
    ]
    assert not wrong, f"README gives metrics labels they do not have: {wrong}"


# README.md's YAML: every block parses; configs, policies and curator lists pass `curator check`

BASE: dict[str, Any] = {
    "upstreams": {"openai": {"base_url": "https://api.openai.com/v1"}},
    "policies": {"default": "preset:default"},
    "routes": [{"name": "default", "upstream": "openai", "policy": "default"}],
}
"""What a block that is not a whole config is checked in: its sections replace these, a
policy is the route's policy, a list is that policy's curators."""


def yaml_blocks(readme: str) -> list[tuple[int, str]]:
    """(line, text) of each ```yaml block."""
    return [
        (readme.count("\n", 0, m.start()) + 1, m.group(1))
        for m in re.finditer(r"^```yaml\n(.*?)^```", readme, flags=re.DOTALL | re.MULTILINE)
    ]


def inline_configs(readme: str) -> list[str]:
    """Inline code that is a one-line config section, e.g. `audit: {sink: none}`."""
    sections = "|".join(SECTIONS)
    return re.findall(rf"`((?:{sections}): \{{[^`]*\}})`", readme)


def as_config(data: Any) -> tuple[dict[str, Any], bool]:
    """The config a block is checked as, and whether the block is a whole one."""
    if isinstance(data, list):
        return {**BASE, "policies": {"default": {"curators": data}}}, False
    if isinstance(data, dict) and set(data) <= set(SECTIONS):
        return ({**data}, True) if "routes" in data else ({**BASE, **data}, False)
    return {**BASE, "policies": {"default": data}}, False


def _environment(text: str) -> dict[str, str]:
    """A value for each ${VAR} a block needs (one without a default)."""
    names = re.findall(r"\$\{(\w+)\}", text)
    dsn = "postgresql://curator@127.0.0.1:5432/audit"
    return {name: dsn if name.endswith("_DSN") else f"value-of-{name.lower()}" for name in names}


def test_readme_yaml_is_found() -> None:
    assert len(yaml_blocks(README)) >= 10
    assert 'audit: {dsn: "${CURATOR_AUDIT_DSN}"}' in inline_configs(README)


@pytest.mark.parametrize(
    ("line", "text"), [pytest.param(*block, id=f"line{block[0]}") for block in yaml_blocks(README)]
)
def test_every_readme_yaml_block_passes_check(
    line: int,
    text: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = yaml.safe_load(text)
    config, whole = as_config(data)
    path = tmp_path / "config.yaml"
    path.write_text(text if whole else yaml.safe_dump(config))
    for name, value in _environment(text).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--config", str(path)]) == 0, (
        f"README.md:{line}: {capsys.readouterr().err}"
    )


@pytest.mark.parametrize("text", inline_configs(README))
def test_every_inline_config_parses(text: str) -> None:
    assert isinstance(yaml.safe_load(text), dict)
