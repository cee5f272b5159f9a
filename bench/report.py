"""Benchmark rows and the one markdown table they are printed as."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

COLUMNS = ("case", "path", "req/s", "p50 ms", "p99 ms", "vs floor", "figure", "target", "met")


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the results table. Figures that do not apply stay None."""

    case: str
    path: str
    rps: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    vs_floor: str = ""
    figure: str = ""
    """The number the target is about, e.g. `+1.2 ms p50` or `0.93x floor`."""
    target: str = ""
    met: bool | None = None
    note: str = ""

    @property
    def measured(self) -> bool:
        return self.p50_ms is not None or bool(self.figure)


def skipped(case: str, path: str, reason: str, target: str = "") -> Row:
    return Row(case, path, target=target, note=f"skipped: {reason}")


def ratio(value: float | None, floor: float | None) -> str:
    if value is None or floor is None or floor == 0 or math.isnan(value) or math.isnan(floor):
        return ""
    return f"{value / floor:.2f}x"


def _num(value: float | None, digits: int) -> str:
    if value is None or math.isnan(value):
        return ""
    return f"{value:,.{digits}f}"


def _met(row: Row) -> str:
    if row.met is None:
        return ""
    return "yes" if row.met else "**no**"


def markdown_table(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        figure = r.figure if not r.note else f"{r.figure} ({r.note})".strip()
        cells = (
            r.case,
            r.path,
            _num(r.rps, 0),
            _num(r.p50_ms, 2),
            _num(r.p99_ms, 2),
            r.vs_floor,
            figure,
            r.target,
            _met(r),
        )
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)
