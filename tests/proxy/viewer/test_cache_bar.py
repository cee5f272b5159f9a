"""The cache bar's markup: a segment per turn, its cause, and the anchor it links to."""

from __future__ import annotations

from proxy.viewer.cache_bar import cache_bar


def turn(rid: str, cause: str, at: dict[str, object] | None = None, rebilled: int = 0) -> dict:
    return {"id": rid, "cache": {"cause": cause, "diverged_at": at, "rebilled_tokens": rebilled}}


def test_records_without_attribution_draw_no_bar() -> None:
    assert cache_bar([{"id": "a"}], "/v") == ""


def test_each_segment_links_to_where_its_prompt_parted() -> None:
    html = str(
        cache_bar(
            [
                turn("a", "first_turn"),
                turn(
                    "b", "curation", {"prompt": "curated", "element": "message", "index": 4}, 2048
                ),
                turn("c", "client", {"prompt": "original", "element": "message", "index": 1}),
                turn("d", "client", {"prompt": "original", "element": "tools", "index": None}),
                {"id": "e"},
            ],
            "/v",
        )
    )
    assert html.count("<li class=") == 5
    assert 'href="/v/requests/b#c4"' in html
    assert "turn 2: curation moved the prefix, 2,048 tokens re-billed at curated message #4" in html
    assert 'href="/v/requests/c#o1"' in html
    assert 'href="/v/requests/d"' in html  # the tools have no anchor
    assert 'class="cause-unknown"' in html
