"""The trajectory benchmark's figures: what each strategy sent, billed and lost, summed over
steps (`Tally`), and as shares of the whole history and the naive window (`Row`, `table`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

FULL, NAIVE = "whole history", "naive window"


@dataclass(slots=True)
class Tally:
    """One strategy's figures over some steps (summable)."""

    requests: int = 0
    tokens: int = 0
    cached: int = 0
    bill: float = 0.0
    bill_writes: float = 0.0
    refs: int = 0
    refs_lost: int = 0
    edit_seen: int = 0
    edit_lost: int = 0
    rejected: int = 0
    over_window: int = 0

    def add(self, other: Tally) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True, slots=True)
class Row:
    """One strategy at one window, as printed."""

    window: int
    strategy: str
    tokens: float
    bill: float
    bill_writes: float
    vs_naive: float
    hit_ratio: float
    refs_lost: float
    edit_lost: float
    rejected: int
    requests: int


def rows(by_window: Mapping[int, Mapping[str, Tally]]) -> list[Row]:
    out: list[Row] = []
    for window, tallies in sorted(by_window.items()):
        full, naive = tallies[FULL], tallies[NAIVE]
        for name, t in tallies.items():
            out.append(
                Row(
                    window,
                    name,
                    _share(t.tokens, full.tokens),
                    _share(t.bill, full.bill),
                    _share(t.bill_writes, full.bill_writes),
                    _share(t.bill, naive.bill),
                    _share(t.cached, t.tokens),
                    _share(t.refs_lost, t.refs),
                    _share(t.edit_lost, t.edit_seen),
                    t.rejected,
                    t.requests,
                )
            )
    return out


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def table(found: Sequence[Row]) -> str:
    header = (
        "window",
        "strategy",
        "tokens",
        "bill",
        "bill+w",
        "vs naive",
        "cache hit",
        "refs lost",
        "edit lines lost",
        "rejected",
    )
    cells = [header] + [
        (
            f"{r.window // 1024}k",
            r.strategy,
            f"{r.tokens:.0%}",
            f"{r.bill:.0%}",
            f"{r.bill_writes:.0%}",
            f"{r.vs_naive:.0%}",
            f"{r.hit_ratio:.0%}",
            f"{r.refs_lost:.2%}",
            f"{r.edit_lost:.2%}",
            f"{r.rejected}/{r.requests}",
        )
        for r in found
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        )
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
