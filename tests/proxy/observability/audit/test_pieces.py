"""Pieces of a known secret that a head-and-tail cut leaves in a curated copy."""

from __future__ import annotations

from proxy.observability.audit.pieces import MIN_PIECE, piece_spans

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"


def test_the_head_and_the_tail_of_a_cut_secret_are_both_found() -> None:
    head, tail = SECRET[:20], SECRET[-15:]
    text = f"key={head}\n\n[... 3,000 tokens truncated ...]\n\n{tail} end"
    spans = piece_spans(text, ((SECRET, 4),))
    found = sorted(text[a:b] for a, b, _ in spans)
    assert found == sorted([head, tail])
    assert {which for _, _, which in spans} == {4}


def test_short_pieces_and_short_secrets_are_left_alone() -> None:
    text = f"{SECRET[: MIN_PIECE - 1]} ... {SECRET[-(MIN_PIECE - 1) :]}"
    assert piece_spans(text, ((SECRET, 0),)) == []
    assert piece_spans("short-secret-1", (("short", 0),)) == []


def test_a_whole_secret_is_one_span_from_each_end() -> None:
    text = f"before {SECRET} after"
    start = text.index(SECRET)
    spans = piece_spans(text, ((SECRET, 1),))
    assert (start, start + len(SECRET), 1) in spans
