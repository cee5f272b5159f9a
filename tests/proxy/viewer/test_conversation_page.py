"""The Conversation page: turns oldest first, the token chart, and where each turn's cut sits."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.viewer import conversation_page
from proxy.viewer.conversation_page import CHART_H, CHART_W, PAD, chart, first_cut
from proxy.viewer.layout import DASH
from tests.proxy.viewer.html_tree import Element, elements, one, text

HOSTILE = '"><script>alert(1)</script>'
BASE = CHART_H - PAD
INNER_H = CHART_H - 2 * PAD


def turn(n: int, before: Any = None, after: Any = None, cached: int | None = None,
         **fields: Any) -> dict[str, Any]:  # fmt: skip
    usage = {"prompt_tokens_details": {"cached_tokens": cached}} if cached is not None else None
    return {
        "id": f"t{n}",
        "time": f"2026-01-01T00:00:0{n}Z",
        "tokens_before": before,
        "tokens_after": after,
        "response": {"usage": usage},
        "status": 200,
        **fields,
    }


def render(turns: list[dict[str, Any]], *, more: bool = False, key: str = "c0ffee") -> str:
    return str(conversation_page.render(key, turns, prefix="/p", more=more))


def bars(svg: str, kind: str) -> list[Element]:
    return elements(svg, "rect", class_=kind)


def height(rect: Element) -> float:
    return float(rect.attrs["height"] or "nan")


def test_no_turns_is_an_empty_state_with_the_key() -> None:
    html = render([], key=HOSTILE)
    assert one(html, "code").text == HOSTILE
    assert "No records." in text(html)
    assert "<script>" not in html
    assert elements(html, "svg") == elements(html, "table") == []


def test_turns_are_numbered_in_order_and_link_to_their_request() -> None:
    html = render([turn(0, 100, 100), turn(1, 200, 150), turn(2, 300, 120)])
    rows = elements(html, "tr")[1:]
    assert [r.text.split("2026")[0] for r in rows] == ["1", "2", "3"]
    links = elements(html, "a", class_="rowlink")
    assert [a.attrs["href"] for a in links] == [
        "/p/requests/t0",
        "/p/requests/t1",
        "/p/requests/t2",
    ]
    assert [a.text for a in links] == [f"2026-01-01 00:00:0{n}" for n in range(3)]
    assert "3 requests" in text(html)


def test_a_row_shows_messages_tokens_cache_cut_actions_and_status() -> None:
    actions = [{"curator": "token_budget", "indexes": [4, 2, 3]}]
    row = turn(0, 1000, 400, cached=256, messages=9, curated_messages=6, actions=actions,
               status=500)  # fmt: skip
    cells = [td.text for td in elements(render([row]), "td")]
    assert cells == ["1", "2026-01-01 00:00:00", "9 \u2192 6", "1,000 \u2192 400 \u221260%", "256",
                     "2", "token_budget \u00d73", "500"]  # fmt: skip


def test_a_bare_row_shows_dashes() -> None:
    cells = [td.text for td in elements(render([{"id": "x"}]), "td")]
    assert cells[2:] == [f"{DASH} \u2192 {DASH}", DASH, DASH, DASH, "unchanged", DASH]


def test_the_cap_note_only_when_more_turns_exist() -> None:
    note = "Only the newest 2 turns are shown."
    assert note in text(render([turn(0), turn(1)], more=True))
    assert note not in text(render([turn(0), turn(1)], more=False))


@pytest.mark.parametrize(
    ("record", "cut"),
    [
        ({}, None),
        ({"actions": []}, None),
        ({"actions": [{"indexes": []}, "junk"]}, None),
        ({"actions": [{"indexes": [7, 5]}, {"indexes": [6]}]}, 5),
        ({"actions": [{"indexes": ["1", None, True, 9]}]}, 1),  # True is an int: index 1
        ({"actions": [{"indexes": [0]}]}, 0),
    ],
)
def test_first_cut_is_the_lowest_index_any_action_touched(record: dict[str, Any], cut: Any) -> None:
    assert first_cut(record) == cut


def test_the_first_change_at_index_zero_is_shown_not_dashed() -> None:
    cells = [td.text for td in elements(render([turn(0, actions=[{"indexes": [0]}])]), "td")]
    assert cells[5] == "0"


def test_chart_bars_scale_to_the_largest_value() -> None:
    svg = str(chart([turn(0, 1000, 500, cached=250), turn(1, 2000, 2000, cached=0)]))
    before, after = bars(svg, "before"), bars(svg, "after")
    assert [height(r) for r in before] == [INNER_H / 2, INNER_H]
    assert [height(r) for r in after] == [INNER_H / 4, INNER_H]
    for rect in before + after:  # every bar stands on the baseline
        assert float(rect.attrs["y"] or "nan") + height(rect) == pytest.approx(BASE, abs=0.1)
    assert [r.text for r in before] == ["turn 1: 1,000 sent", "turn 2: 2,000 sent"]
    assert [r.text for r in after] == ["after: 500", "after: 2,000"]
    assert "2,000" in [t.text for t in elements(svg, "text", class_="axis")]


def test_chart_cached_line_has_a_point_per_turn_on_the_same_scale() -> None:
    svg = str(chart([turn(0, 1000, 1000, cached=1000), turn(1, 1000, 1000, cached=0)]))
    points = one(svg, "polyline", class_="cached").attrs["points"] or ""
    ys = [float(p.split(",")[1]) for p in points.split()]
    assert ys == [PAD, BASE]


def test_chart_of_turns_without_counts_is_flat_not_a_division_by_zero() -> None:
    svg = str(chart([turn(0), turn(1, "many", True)]))
    assert [height(r) for r in bars(svg, "before") + bars(svg, "after")] == [0.0] * 4
    assert [t.text for t in elements(svg, "text", class_="axis")] == ["1", "0"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 10**7), st.integers(0, 10**7), st.integers(0, 10**7)),
        min_size=1,
        max_size=60,
    )
)
def test_chart_bars_stay_inside_the_plot(series: list[tuple[int, int, int]]) -> None:
    svg = str(chart([turn(n, b, a, cached=c) for n, (b, a, c) in enumerate(series)]))
    assert_inside(svg)
    assert len(bars(svg, "before") + bars(svg, "after")) == 2 * len(series)
    points = (one(svg, "polyline", class_="cached").attrs["points"] or "").split()
    assert len(points) == len(series)


def assert_inside(svg: str) -> None:
    """Every bar within the plot, and no two bars overlapping."""
    rects = sorted(bars(svg, "before") + bars(svg, "after"), key=lambda r: x_of(r))
    for left, right in itertools.pairwise(rects):
        assert x_of(left) + float(left.attrs["width"] or "nan") <= x_of(right) + 0.2  # rounding
    for rect in rects:
        x, y = float(rect.attrs["x"] or "nan"), float(rect.attrs["y"] or "nan")
        assert x >= PAD - 0.1
        assert x + float(rect.attrs["width"] or "nan") <= CHART_W - PAD + 0.1
        assert PAD - 0.1 <= y <= BASE + 0.1
        assert 0 <= height(rect) <= INNER_H + 0.1


def x_of(rect: Element) -> float:
    return float(rect.attrs["x"] or "nan")


@pytest.mark.parametrize("n", [162, 163, 500, 1000, 4321])
def test_a_long_conversation_gets_a_pair_of_bars_per_run_of_turns(n: int) -> None:
    # Turn k sent 100 * k tokens, and was curated to at most 5,000.
    svg = str(chart([turn(k, 100 * k, min(100 * k, 5000), cached=k) for k in range(1, n + 1)]))
    assert_inside(svg)
    before = bars(svg, "before")
    per = -(-n // 162)  # the plot's 648 units hold 162 pairs of 2-unit bars
    assert len(before) == -(-n // per)
    if per == 1:
        assert before[-1].text == f"turn {n}: {100 * n:,} sent"
    else:  # a run is as tall as its largest turn, and says which turns it holds
        first = (len(before) - 1) * per + 1
        held = f"turn {n}:" if first == n else f"turns {first}-{n}: up to"
        assert before[-1].text == f"{held} {100 * n:,} sent"
    assert height(before[-1]) == pytest.approx(INNER_H, abs=0.1)
    points = (one(svg, "polyline", class_="cached").attrs["points"] or "").split()
    assert len(points) == len(before)
