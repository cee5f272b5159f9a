"""The docs site builds as `make docs` builds it, strictly: a broken link or anchor, or a page
left out of the nav, fails. README.md is not part of the site, so its links into docs/ are
checked here against the pages and anchors the build produced."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr}"
    return out


def _html(site: Path, page: str) -> str:
    """The built HTML of docs/<page> (use_directory_urls: a.md -> a/index.html)."""
    stem = page.removesuffix(".md")
    return (site / ("index.html" if stem == "index" else f"{stem}/index.html")).read_text()


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").glob("*.md"))
    assert {"configuration.md", "metrics.md", "performance.md", "architecture.md"} <= set(pages)
    for page in pages:
        assert "<h1" in _html(site, page), page


def test_readme_links_into_the_docs_resolve(site: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(docs/([^)#]+\.md)(?:#([^)]+))?\)", readme)
    assert len(links) >= 10
    broken = []
    for page, anchor in links:
        if not (ROOT / "docs" / page).is_file():
            broken.append(page)
        elif anchor and f'id="{anchor}"' not in _html(site, page):
            broken.append(f"{page}#{anchor}")
    assert not broken, f"README.md links to what the docs do not have: {broken}"
