"""The side-by-side rows: kept, shortened (head, cut, tail), dropped, and summaries linked
to the messages they replaced."""

from __future__ import annotations

from typing import Any

from policies.messages import SUMMARY_PREFIX
from proxy.viewer import sidebyside
from tests import factories as f


def record(original: list[Any], curated: list[Any], actions: list[Any]) -> dict[str, Any]:
    return {"id": "r", "original": original, "curated": curated, "actions": actions}


def test_truncated_content_shows_head_cut_and_tail() -> None:
    body = "HEAD-" + "middle " * 200 + "-TAIL"
    cut = "HEAD-[... 1,400 chars truncated ...]-TAIL"
    original = [f.user("go"), f.assistant_calls(f.call("c1")), f.tool_result("c1", body)]
    curated = [*original[:2], f.tool_result("c1", cut)]
    action = {"curator": "tool_result_truncation", "kind": "truncate", "indexes": [2],
              "tokens_removed": 190, "reason": "'search' result cut"}  # fmt: skip
    rec = record(original, curated, [action])
    assert [r.change for r in sidebyside.rows(rec)] == ["same", "same", "changed"]
    html = str(sidebyside.render(rec))
    assert '<mark class="placeholder" title="put in place of 1,400 chars">[... 1,400 chars ' in html
    assert 'HEAD-<details class="cut"><summary>1,400 chars cut</summary><del>middle' in html
    assert "</del></details>-TAIL" in html
    assert '<strong class="curator">tool_result_truncation</strong> truncate' in html
    assert "(&minus;190 tokens for this action)" in html


def test_a_summary_links_to_the_messages_it_replaced() -> None:
    original = [
        f.system(),
        f.user("a"),
        f.assistant("b"),
        f.user("c"),
        f.assistant("d"),
        f.user("e"),
    ]
    summary = {"role": "user", "content": SUMMARY_PREFIX + "]: a, b, c and d happened"}
    curated = [original[0], summary, original[5]]
    action = {"curator": "summarizer", "kind": "summarize", "indexes": [1, 2, 3, 4],
              "tokens_removed": 20, "reason": "summarized 4 messages"}  # fmt: skip
    rows = sidebyside.rows(record(original, curated, [action]))
    changes = [(r.change, r.i, r.j) for r in rows]
    assert changes == [
        ("same", 0, 0), ("dropped", 1, None), ("dropped", 2, None), ("dropped", 3, None),
        ("dropped", 4, None), ("inserted", None, 1), ("same", 5, 2),
    ]  # fmt: skip
    assert rows[5].replaced == [1, 2, 3, 4]
    assert all(r.summarized_into == 1 for r in rows[1:5])
    html = str(sidebyside.render(record(original, curated, [action])))
    assert 'Replaces original <a href="#o1">#1</a>, <a href="#o2">#2</a>' in html
    assert 'summarized in <a href="#c1">curated #1</a>' in html
    assert '<span class="badge ins">summary</span>' in html


def test_dropped_units_are_collapsed_and_struck_through() -> None:
    original = [f.user("old"), f.assistant("old answer"), f.user("new")]
    action = {"curator": "token_budget", "kind": "drop", "indexes": [0, 1],
              "tokens_removed": 9, "reason": "over budget"}  # fmt: skip
    html = str(sidebyside.render(record(original, [original[2]], [action])))
    assert html.count('<details class="dropped">') == 2
    assert '<del><div class="text">old answer</div></del>' in html
    assert html.count('<div class="gap" aria-label="not sent">dropped</div>') == 2


def test_cleared_tool_result_shows_its_placeholder() -> None:
    placeholder = "[tool result: 120 lines, ~4 KB; omitted from history by context-curator]"
    original = [f.user("go"), f.assistant_calls(f.call("c1")), f.tool_result("c1", "x\n" * 2000)]
    curated = [*original[:2], f.tool_result("c1", placeholder)]
    html = str(sidebyside.render(record(original, curated, [])))
    assert f'chars">{placeholder}</mark>' in html
    assert "4,000 chars cut" in html
