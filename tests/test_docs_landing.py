"""docs/index.md, the docs site's landing page, summarises README.md's promises: every
figure it gives is one README gives, so the two cannot drift apart (a re-measured figure
changed in one place only fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURE = re.compile(r"[+-]?\d[\d,.]*\s?(?:%|ms|MB|k\b)")


def figures(text: str) -> set[str]:
    return {re.sub(r"\s", "", f) for f in FIGURE.findall(text)}


def test_figures_are_found() -> None:
    assert figures("TTFB +0.21 ms, 97% at 128k, 138 MB") == {"+0.21ms", "97%", "128k", "138MB"}


def test_the_landing_page_gives_only_readme_figures() -> None:
    landing = figures((ROOT / "docs" / "index.md").read_text())
    assert len(landing) >= 8
    readme = figures((ROOT / "README.md").read_text())
    assert landing <= readme, f"docs/index.md gives figures README.md does not: {landing - readme}"
