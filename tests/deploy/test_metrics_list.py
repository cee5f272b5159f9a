"""deploy/metrics.txt: well formed, and the same families the proxy's metrics module exports."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from proxy.observability.metrics.families import Metrics
from proxy.observability.metrics.labels import Labels
from tests.deploy import metric_families


def test_metrics_list_is_well_formed() -> None:
    families = metric_families()
    assert families, "deploy/metrics.txt lists no metric"
    for family in families.values():
        assert re.fullmatch(r"curator_[a-z][a-z_]*[a-z]", family.name), family.name
        assert family.type in {"counter", "gauge", "histogram"}, family
        assert family.name.endswith("_total") == (family.type == "counter"), family
        if family.type == "histogram":
            units = ("_seconds", "_ratio")
            assert family.name.endswith(units), f"{family.name}: base units in the name"
            assert "le" not in family.labels, family


def test_the_proxy_exports_exactly_the_listed_families() -> None:
    labels = Labels(routes=frozenset({"r"}), policies=frozenset({"p"}), curators=frozenset({"c"}))
    text = Metrics(labels).render()[0].decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE))
    # prometheus-client adds a `<name>_created` gauge beside each counter: not a family of ours.
    created = {n.removesuffix("_total") + "_created" for n, t in types.items() if t == "counter"}
    exported = {name: kind for name, kind in types.items() if name not in created}
    assert exported == {f.name: f.type for f in metric_families().values()}


def test_pre_created_label_values_are_listed() -> None:
    """Families the proxy initialises at start show their label sets without any traffic."""
    labels = Labels(routes=frozenset(), policies=frozenset(), curators=frozenset())
    text = Metrics(labels).render()[0].decode()
    families = metric_families()
    for parsed in text_string_to_metric_families(text):
        for sample in parsed.samples:
            if sample.name not in families:
                continue
            listed = families[sample.name].labels
            for label, value in sample.labels.items():
                assert label in listed, f"{sample.name}: label {label} is not listed"
                values = listed[label]
                assert values is None or value in values, f"{sample.name}: {label}={value}"
