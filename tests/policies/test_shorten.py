"""shorten: head + marker + tail cuts within a token cap, planned as numbers."""

from __future__ import annotations

import pytest

from policies.shorten import Cut, as_content, cuttable_text, head_only, head_tail
from tests import factories as f

TEXT = "\n".join(f"{i:5d}\tvalue = compute({i})  # é" for i in range(600))


def marker(removed: int) -> str:
    return f"\n[... {removed:,} tokens cut ...]\n"


@pytest.mark.parametrize(("cap", "ratio"), [(40, 0.5), (300, 0.7), (300, 0.0), (1_000, 1.0)])
def test_a_head_tail_cut_fits_the_cap_and_names_what_it_removed(cap: int, ratio: float) -> None:
    ctx = f.ctx()
    total = f.text_tokens(TEXT)
    cut = head_tail(ctx, TEXT, total, cap, marker, ratio)
    assert cut is not None
    assert cut.marked
    short = cut.apply(TEXT, marker)
    assert cut.tokens == f.text_tokens(short) <= cap
    assert short.startswith(TEXT[: cut.head])
    assert short.endswith(TEXT[len(TEXT) - cut.tail :])
    kept = f.text_tokens(TEXT[: cut.head]) + f.text_tokens(TEXT[len(TEXT) - cut.tail :])
    assert cut.removed == max(0, total - kept)
    if ratio == 0.0:
        assert cut.head == 0


def test_no_head_tail_cut_when_the_marker_alone_is_over_the_cap() -> None:
    ctx = f.ctx()
    assert head_tail(ctx, TEXT, f.text_tokens(TEXT), 3, marker, 0.5) is None


@pytest.mark.parametrize("cap", [1, 3, 12])
def test_a_head_only_cut_is_a_plain_prefix_within_the_cap(cap: int) -> None:
    cut = head_only(f.ctx(), TEXT, cap)
    assert not cut.marked
    assert cut.tail == 0
    short = cut.apply(TEXT, marker)
    assert short == TEXT[: cut.head]
    assert cut.tokens == f.text_tokens(short) <= cap


def test_a_cut_survives_being_remembered_as_a_plain_tuple() -> None:
    for cut in (Cut(10, 5, 42, 30), Cut(7, 0, 0, 3, marked=False)):
        assert Cut.of(tuple(int(n) for n in cut)) == cut


def test_only_strings_and_text_only_arrays_are_cuttable() -> None:
    parts = [{**f.text_part("a"), "cache_control": {"type": "ephemeral"}}, f.text_part("b")]
    assert cuttable_text(f.tool_result("c1", "out")) == ("out", None)
    # A breakpoint before the last part: cut as one, the cut would land across it.
    assert cuttable_text(f.tool_result("c1", parts)) is None
    last = [f.text_part("a"), {**f.text_part("b"), "cache_control": {"type": "ephemeral"}}]
    assert cuttable_text(f.tool_result("c1", last)) == ("ab", last)
    assert cuttable_text(f.tool_result("c1", "")) is None
    assert cuttable_text(f.tool_result("c1", [])) is None
    assert cuttable_text(f.user([f.text_part(), f.image_part()])) is None
    assert cuttable_text(f.assistant(None)) is None


def test_a_cut_text_keeps_its_shape() -> None:
    parts = [{**f.text_part("a"), "cache_control": {"type": "ephemeral"}}, f.text_part("b")]
    assert as_content("cut", None) == "cut"
    assert as_content("cut", parts) == [{**parts[0], "text": "cut"}]
