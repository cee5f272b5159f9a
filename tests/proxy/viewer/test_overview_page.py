"""The Overview page: totals for a range, by route and by policy."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.viewer import overview_page
from proxy.viewer.layout import DASH
from proxy.viewer.overview_page import Totals, tally
from tests.proxy.viewer.html_tree import elements, one, text

HOSTILE = '"><script>alert(1)</script>'


def rec(**fields: Any) -> dict[str, Any]:
    return {"route": "agents", "policy": "agent", "status": 200, **fields}


def usage(prompt: int, cached: int) -> dict[str, Any]:
    return {"usage": {"prompt_tokens": prompt, "prompt_tokens_details": {"cached_tokens": cached}}}


def render(
    rows: list[dict[str, Any]],
    params: dict[str, str] | None = None,
    *,
    capped: bool = False,
    problem: str | None = None,
) -> str:
    total, groups = tally(rows)
    return str(
        overview_page.render(
            total, groups, params or {}, prefix="/p", capped=capped, problem=problem
        )
    )


def cards(html: str) -> dict[str, str]:
    labels = [e.text for e in elements(html, "span", class_="label")]
    values = [e.text for e in elements(html, "span", class_="value")]
    return dict(zip(labels, values, strict=True))


def group_rows(html: str, name: str) -> list[list[str]]:
    start = html.index(f'aria-labelledby="by-{name}"')
    block = html[start : html.index("</section>", start)]
    body = block[block.index("<tbody>") + len("<tbody>") : block.index("</tbody>")]
    rows = [part for part in body.split("</tr>") if part]
    return [[cell.text for cell in elements(tr) if cell.tag in ("th", "td")] for tr in rows]


def test_totals_add_counts_errors_curation_tokens_cache_and_cost() -> None:
    total = Totals()
    total.add(rec(tokens_before=1000, tokens_after=400, response=usage(400, 100), cost_usd=0.5))
    total.add(rec(tokens_before=500, tokens_after=500, status=429, cost_usd=1))
    total.add(rec(tokens_before=300, status=None))  # no after: tokens not counted
    total.add(rec(status="500"))  # a status that is not a number is not an error
    assert total == Totals(
        requests=4, errors=1, curated=1, before=1500, after=900, prompt=400, cached=100,
        cost=1.5, costed=2,
    )  # fmt: skip
    assert total.saved_pct() == "40.0%"
    assert total.cache_ratio() == "25.0%"


def test_ratios_without_a_base_are_dashes() -> None:
    assert Totals().saved_pct() == DASH
    assert Totals().cache_ratio() == DASH
    assert Totals(before=0, after=0, prompt=0, cached=5).cache_ratio() == DASH


def test_tally_groups_by_route_and_policy_with_a_dash_for_none() -> None:
    rows = [rec(), rec(route="chat", policy="off"), rec(route=None, policy=""), rec(route="chat")]
    total, groups = tally(rows)
    assert total.requests == 4
    assert {k: t.requests for k, t in groups["route"].items()} == {"agents": 1, "chat": 2, DASH: 1}
    assert {k: t.requests for k, t in groups["policy"].items()} == {"agent": 2, "off": 1, DASH: 1}


def test_tally_of_nothing() -> None:
    total, groups = tally([])
    assert total == Totals()
    assert groups == {"route": {}, "policy": {}}


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "route": st.sampled_from(["a", "b", None]),
                "policy": st.sampled_from(["p", "q"]),
                "status": st.sampled_from([200, 400, 503, None]),
                "tokens_before": st.integers(0, 10**6),
                "tokens_after": st.integers(0, 10**6),
            }
        ),
        max_size=30,
    )
)
def test_each_grouping_adds_up_to_the_total(rows: list[dict[str, Any]]) -> None:
    total, groups = tally(rows)
    for by in groups.values():
        assert sum(t.requests for t in by.values()) == total.requests == len(rows)
        assert sum(t.errors for t in by.values()) == total.errors
        assert sum(t.before - t.after for t in by.values()) == total.before - total.after


def test_cards_show_the_totals() -> None:
    rows = [rec(tokens_before=2000, tokens_after=1500, response=usage(1500, 750), cost_usd=1.234),
            rec(status=502)]  # fmt: skip
    assert cards(render(rows)) == {
        "Requests": "2",
        "Curated": "1",
        "Tokens saved": "500 (25.0%)",
        "Cache hit ratio": "50.0%",
        "Cost": "$1.23",
        "Errors": "1",
    }


def test_an_empty_range_has_zero_cards_and_empty_tables() -> None:
    html = render([])
    assert cards(html) == {
        "Requests": "0",
        "Curated": "0",
        "Tokens saved": f"0 ({DASH})",
        "Cache hit ratio": DASH,
        "Cost": "not priced",
        "Errors": "0",
    }
    assert group_rows(html, "route") == group_rows(html, "policy") == []


def test_group_tables_list_the_busiest_first() -> None:
    rows = [rec(route="quiet", policy="p", tokens_before=10, tokens_after=5)]
    rows += [rec(route="busy", policy="p", tokens_before=100, tokens_after=100)] * 3
    html = render(rows)
    assert group_rows(html, "route") == [
        ["busy", "3", "300", "300", "0.0%", DASH],
        ["quiet", "1", "10", "5", "50.0%", DASH],
    ]
    assert group_rows(html, "policy") == [["p", "4", "310", "305", "1.6%", DASH]]
    assert [h.text for h in elements(html, "h2")] == ["By route", "By policy"]


def test_the_range_form_defaults_to_a_week() -> None:
    html = render([])
    form = one(html, "form", class_="filters")
    assert form.attrs["action"] == "/p/overview"
    assert one(html, "input", name="since").attrs["value"] == "7d"
    assert one(html, "input", name="until").attrs["value"] == ""
    html = render([], {"since": "2026-01-01", "until": "1h"})
    assert one(html, "input", name="since").attrs["value"] == "2026-01-01"
    assert one(html, "input", name="until").attrs["value"] == "1h"


@pytest.mark.parametrize("capped", [True, False])
def test_the_cap_note_only_when_capped(capped: bool) -> None:
    assert ("Counted the newest records only" in render([rec()], capped=capped)) is capped


def test_a_problem_is_an_alert_and_hostile_values_are_text() -> None:
    html = render(
        [rec(route=HOSTILE, policy=HOSTILE)],
        {"since": HOSTILE, "until": HOSTILE},
        problem=f"time range: got {HOSTILE!r}",
    )
    assert "<script>" not in html
    assert one(html, "p", role="alert").text == f"time range: got {HOSTILE!r}"
    assert one(html, "input", name="since").attrs["value"] == HOSTILE
    assert group_rows(html, "route")[0][0] == HOSTILE
    assert elements(render([]), "p", role="alert") == []
    assert HOSTILE in text(html)
