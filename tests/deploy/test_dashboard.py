"""The Grafana dashboard: valid PromQL over the metrics in deploy/metrics.txt, and sound panels."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import promql_parser as promql
import pytest

from tests.deploy import DEPLOY, Family, metric_families

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "context-curator.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")
# Prometheus attaches these to every scraped series.
TARGET_LABELS = frozenset({"job", "instance"})
# Grafana interpolates these before the query reaches Prometheus; the parser needs a duration.
RANGE_VARIABLES = ("$__rate_interval", "$__interval", "$__range")
UNITS = frozenset({"s", "short", "percentunit", "reqps", "ops", "currencyUSD"})
COUNTER_FUNCTIONS = frozenset({"rate", "irate", "increase"})
FAMILIES = metric_families()


def resolve(series: str) -> tuple[Family, str] | None:
    """The family a series name belongs to, and its histogram suffix ("" if none)."""
    if series in FAMILIES:
        return FAMILIES[series], ""
    for suffix in HISTOGRAM_SERIES:
        base = series.removesuffix(suffix)
        if base != series and base in FAMILIES and FAMILIES[base].type == "histogram":
            return FAMILIES[base], suffix
    return None


def parse(expr: str) -> promql.Expr:
    for variable in RANGE_VARIABLES:
        expr = expr.replace(variable, "5m")
    return promql.parse(expr)


def nodes(expr: promql.Expr) -> list[Any]:
    found: list[Any] = []
    promql.walk(expr, found.append)
    return found


def selector_problems(sel: promql.VectorSelector) -> list[str]:
    resolved = resolve(sel.name or "")
    if resolved is None:
        return [f"unknown metric {sel.name!r}"]
    family, suffix = resolved
    allowed = set(family.labels) | TARGET_LABELS | ({"le"} if suffix == "_bucket" else set())
    problems = []
    for matcher in sel.matchers.matchers:
        values = family.labels.get(matcher.name)
        if matcher.name not in allowed:
            problems.append(f"{sel.name} has no label {matcher.name!r}")
        elif matcher.op == promql.MatchOp.Equal and values and matcher.value not in values:
            problems.append(f"{sel.name}: {matcher.name}={matcher.value!r} is not one of {values}")
    if "route" in family.labels and not any(
        m.name == "route" and m.value == "$route" for m in sel.matchers.matchers
    ):
        problems.append(f"{sel.name} is not filtered by the $route variable")
    return problems


def labels_under(node: Any) -> set[str]:
    labels = set(TARGET_LABELS)
    for sub in nodes(node):
        if isinstance(sub, promql.VectorSelector) and (resolved := resolve(sub.name or "")):
            labels |= set(resolved[0].labels) | ({"le"} if resolved[1] == "_bucket" else set())
    return labels


def call_problems(call: promql.Call) -> list[str]:
    name = call.func.name
    if name in COUNTER_FUNCTIONS:
        for sub in nodes(call):
            resolved = isinstance(sub, promql.VectorSelector) and resolve(sub.name or "")
            if resolved and resolved[0].type == "gauge":
                return [f"{name}() over the gauge {sub.name}"]
    if name == "histogram_quantile":
        agg = call.args[1]
        inner = nodes(agg)
        if not (
            isinstance(agg, promql.AggregateExpr)
            and agg.modifier is not None
            and agg.modifier.type == promql.AggModifierType.By
            and "le" in agg.modifier.labels
            and any(isinstance(n, promql.Call) and n.func.name == "rate" for n in inner)
            and any(
                isinstance(n, promql.VectorSelector) and (n.name or "").endswith("_bucket")
                for n in inner
            )
        ):
            return ["histogram_quantile needs sum by (le, ...) (rate(<histogram>_bucket[...]))"]
    return []


def expression_problems(expr: str) -> list[str]:
    """Everything wrong with one dashboard query: unknown metrics or labels, misused functions."""
    problems: list[str] = []
    for node in nodes(parse(expr)):
        if isinstance(node, promql.VectorSelector):
            problems += selector_problems(node)
        elif isinstance(node, promql.Call):
            problems += call_problems(node)
        elif isinstance(node, promql.AggregateExpr) and node.modifier is not None:
            missing = set(node.modifier.labels) - labels_under(node.expr)
            problems += [f"{node.op} by unknown label {label!r}" for label in sorted(missing)]
    return problems


def load_dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def all_panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def query_panels() -> list[dict[str, Any]]:
    return [p for p in all_panels(load_dashboard()) if p["type"] != "row"]


def expressions() -> list[tuple[str, str]]:
    """(where, expr) for every PromQL query in the dashboard: panel targets and annotations."""
    found = [
        (f"{p['title']}/{t['refId']}", t["expr"]) for p in query_panels() for t in p["targets"]
    ]
    for annotation in load_dashboard()["annotations"]["list"]:
        if "expr" in annotation:
            found.append((f"annotation {annotation['name']}", annotation["expr"]))
    return found


@pytest.mark.parametrize(("where", "expr"), expressions())
def test_expression_is_valid_over_known_metrics(where: str, expr: str) -> None:
    assert expression_problems(expr) == [], where


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ('sum(rate(curator_request_total{route=~"$route"}[5m]))', "unknown metric"),
        ('sum(rate(curator_tokens_total{route=~"$route",stage="saved"}[5m]))', "not one of"),
        ('sum by (model) (rate(curator_requests_total{route=~"$route"}[5m]))', "unknown label"),
        ('sum(rate(curator_requests_total{route=~"$route",team="a"}[5m]))', "has no label"),
        ("sum(rate(curator_requests_total[5m]))", "not filtered by the $route"),
        ("rate(curator_inflight_requests[5m])", "over the gauge"),
        (
            "histogram_quantile(0.9, sum(rate("
            'curator_curation_seconds_bucket{route=~"$route"}[5m])))',
            "histogram_quantile needs",
        ),
    ],
)
def test_expression_checker_rejects(expr: str, problem: str) -> None:
    assert any(problem in p for p in expression_problems(expr)), expression_problems(expr)


def test_expression_checker_rejects_invalid_promql() -> None:
    with pytest.raises(ValueError, match="parenthesis"):
        parse("sum(rate(curator_requests_total[5m])")


def test_every_metric_family_is_charted() -> None:
    used = {
        resolved[0].name
        for _, expr in expressions()
        for node in nodes(parse(expr))
        if isinstance(node, promql.VectorSelector) and (resolved := resolve(node.name or ""))
    }
    assert set(FAMILIES) - used == set()


def test_histograms_show_p50_and_p99() -> None:
    for family in (f for f in FAMILIES.values() if f.type == "histogram"):
        quantiles = {
            float(m.group(1))
            for _, expr in expressions()
            if f"{family.name}_bucket" in expr
            for m in re.finditer(r"histogram_quantile\(([0-9.]+)", expr)
        }
        assert {0.5, 0.99} <= quantiles, family.name


def test_dashboard_metadata_and_variables() -> None:
    dashboard = load_dashboard()
    assert 38 <= dashboard["schemaVersion"] <= 41
    assert dashboard["uid"] == "context-curator"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    route = variables["route"]
    assert route["type"] == "query"
    assert route["datasource"] == DATASOURCE
    assert route["includeAll"]
    assert route["multi"]
    assert route["allValue"] == ".*", "the All value must work inside route=~"
    query = route["query"]["query"] if isinstance(route["query"], dict) else route["query"]
    match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query)
    assert match, query
    assert match.group(2) in FAMILIES[match.group(1)].labels


def test_panel_ids_are_unique() -> None:
    ids = [p["id"] for p in all_panels(load_dashboard())]
    assert len(ids) == len(set(ids))


def test_every_panel_has_datasource_targets_and_legends() -> None:
    panels = query_panels()
    assert len(panels) >= 12
    for panel in panels:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        assert panel.get("description"), panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert target["expr"].strip(), panel["title"]
            assert target["legendFormat"].strip(), panel["title"]


def test_units_fit_the_queries() -> None:
    for panel in query_panels():
        unit = panel["fieldConfig"]["defaults"]["unit"]
        exprs = [t["expr"] for t in panel["targets"]]
        assert unit in UNITS, panel["title"]
        ratios = [e for e in exprs if "histogram_quantile" in e and "_ratio_bucket" in e]
        if ratios:  # a histogram of ratios (base unit 1) shows as a percentage
            assert unit == "percentunit", panel["title"]
        elif any("histogram_quantile" in e for e in exprs):
            assert unit == "s", panel["title"]
        if unit == "percentunit":
            assert all(" / " in e or e in ratios for e in exprs), panel["title"]


def test_grid_layout_has_no_overlaps() -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in all_panels(load_dashboard()):
        pos = panel["gridPos"]
        assert min(pos["w"], pos["h"]) > 0, panel["title"]
        assert 0 <= pos["x"] < pos["x"] + pos["w"] <= 24, panel["title"]
        assert pos["y"] >= 0, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = panel["title"]


def test_spend_panels_show_cache_hits_spend_savings_and_a_warning() -> None:
    by_title = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in query_panels()}
    hit = by_title["Real cache hit ratio"]
    assert 'kind="cached"' in hit
    assert 'kind="input"' in hit
    assert " / " in hit
    spend = by_title["Spend: actual vs uncurated"]
    assert "curator_cost_usd_total" in spend
    assert "kind" in spend
    for title in ("Net savings", "Net savings by route and policy"):
        expr = by_title[title]
        assert 'kind="uncurated"' in expr
        assert 'kind="actual"' in expr
        assert " - " in expr
    warning = by_title["Warning: curation costing money"]
    assert warning.rstrip().endswith("> 0"), "shows only routes where actual > uncurated"
