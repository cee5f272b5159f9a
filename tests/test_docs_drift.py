"""Docs that cannot drift from the code.

- Every key the config loader accepts (`tests.config_schema`, read off the loader itself)
  is in config.example.yaml, commented out or not, and in the configuration reference
  (docs/configuration.md); every key either of them names is one the loader accepts.
- Every metric family `/metrics` exports is in the metrics page's table (docs/metrics.md),
  and every `curator_*` metric README.md or a docs page names is exported.
- Every ```yaml block in README.md and the docs pages parses; every one passes
  `curator check` (a block that is not a whole config, in a base config).
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
DOCS = ROOT / "docs"
CONFIG_REFERENCE = DOCS / "configuration.md"
METRICS_PAGE = DOCS / "metrics.md"
PAGES = {
    path.relative_to(ROOT).as_posix(): path.read_text()
    for path in [ROOT / "README.md", *sorted(DOCS.glob("**/*.md"))]
}
"""README.md and every docs page, by their path in the repository."""
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


# docs/configuration.md: the reference table's first column


def reference_keys(page: str) -> set[str]:
    """The keys of the reference table (under the page's title, before its first section);
    `a.b.c`, `d` names `a.b.c` and `a.b.d`."""
    section = page.split("# Configuration reference\n", 1)[1].split("\n#", 1)[0]
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
    page = "# Configuration reference\n| key |\n|---|\n| `a.<n>.b`, `c` | `d` |\n## Next\n"
    assert reference_keys(page) == {"a.*.b", "a.*.c"}


def test_every_accepted_key_is_in_the_configuration_reference(schema: Schema) -> None:
    documented = reference_keys(CONFIG_REFERENCE.read_text())
    missing = sorted(key for key in schema.keys if not _appears(key, documented))
    assert not missing, f"docs/configuration.md's reference table lacks {missing}"


def test_every_key_in_the_configuration_reference_is_accepted(schema: Schema) -> None:
    assert not _unknown(reference_keys(CONFIG_REFERENCE.read_text()), schema)


# docs/metrics.md's table, and every `curator_*` name in README.md and the docs

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


def metrics_table(page: str) -> set[str]:
    """The families in the table under the page's title, before its first section."""
    section = page.split("# Metrics\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(curator_\w+)` \|", section, flags=re.MULTILINE))


def named_metrics(text: str) -> set[str]:
    """Every `curator_*` name, less the skip reason `curator_error` and its like."""
    names = set(re.findall(r"\bcurator_[a-z_]*[a-z]\b", text))
    return names - KNOWN_SKIPS


def test_the_metrics_table_is_read_from_the_page() -> None:
    assert metrics_table("# Metrics\n| `curator_a_total` | counter |\n## Next\n") == {
        "curator_a_total"
    }


def test_every_exported_family_is_in_the_metrics_page(exported: set[str]) -> None:
    assert {"curator_requests_total", "curator_curation_seconds"} <= exported
    missing = sorted(exported - metrics_table(METRICS_PAGE.read_text()))
    assert not missing, f"docs/metrics.md's table lacks {missing}"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_metric_the_docs_name_is_exported(page: str, exported: set[str]) -> None:
    def family(name: str) -> str:
        base = next((name.removesuffix(s) for s in SAMPLE_SUFFIXES if name.endswith(s)), name)
        return base if base in exported else name

    unknown = sorted(n for n in named_metrics(PAGES[page]) if family(n) not in exported)
    assert not unknown, f"{page} names metrics /metrics does not export: {unknown}"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_labels_the_docs_give_a_metric_are_its_own(page: str) -> None:
    """`curator_x_total{label="..."}`: each label is one deploy/metrics.txt lists for it
    (tests/deploy/test_metrics_list.py keeps that list to what the app exports)."""
    families = metric_families()
    wrong = [
        f"{name}{{{label}}}"
        for name, labels in re.findall(r"\b(curator_\w+)\{([^}]*)\}", PAGES[page])
        for label in re.findall(r"(\w+)=", labels)
        if label not in families[name].labels
    ]
    assert not wrong, f"{page} gives metrics labels they do not have: {wrong}"


# The YAML of README.md and the docs: every block parses; configs, policies and curator
# lists pass `curator check`

BASE: dict[str, Any] = {
    "upstreams": {"openai": {"base_url": "https://api.openai.com/v1"}},
    "policies": {"default": "preset:default"},
    "routes": [{"name": "default", "upstream": "openai", "policy": "default"}],
}
"""What a block that is not a whole config is checked in: its sections replace these, a
policy is the route's policy, a list is that policy's curators."""


def yaml_blocks(text: str) -> list[tuple[int, str]]:
    """(line, text) of each ```yaml block."""
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in re.finditer(r"^```yaml\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    ]


def inline_configs(text: str) -> list[str]:
    """Inline code that is a one-line config section, e.g. `audit: {sink: none}`."""
    sections = "|".join(SECTIONS)
    return re.findall(rf"`((?:{sections}): \{{[^`]*\}})`", text)


BLOCKS = [
    pytest.param(page, *block, id=f"{page}:{block[0]}")
    for page, text in PAGES.items()
    for block in yaml_blocks(text)
]
INLINE = [
    pytest.param(text, id=f"{page}:{text}")
    for page, page_text in PAGES.items()
    for text in inline_configs(page_text)
]


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


def test_the_docs_yaml_is_found() -> None:
    assert {"README.md", "docs/configuration.md", "docs/metrics.md"} <= set(PAGES)
    assert len(BLOCKS) >= 15
    assert len({block.values[0] for block in BLOCKS}) >= 5  # from README.md and 4+ pages
    assert 'audit: {dsn: "${CURATOR_AUDIT_DSN}"}' in [param.values[0] for param in INLINE]


@pytest.mark.parametrize(("page", "line", "text"), BLOCKS)
def test_every_yaml_block_passes_check(
    page: str,
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
    assert main(["check", "--config", str(path)]) == 0, f"{page}:{line}: {capsys.readouterr().err}"


@pytest.mark.parametrize("text", INLINE)
def test_every_inline_config_parses(text: str) -> None:
    assert isinstance(yaml.safe_load(text), dict)
