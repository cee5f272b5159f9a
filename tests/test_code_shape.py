"""H's size rules for the two packages: no module over 300 lines, no function over 50, and
no import cycle between modules (TYPE_CHECKING imports included); and that they import no
third-party package their install does not bring."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(p for package in ("policies", "proxy") for p in (ROOT / package).rglob("*.py"))
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 50


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_module_and_function_sizes(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{_name(path)}: split it by concern"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            assert size <= MAX_FUNCTION_LINES, f"{_name(path)}.{node.name}: {size} lines"


def _imports(path: Path, known: set[str]) -> set[str]:
    found: set[str] = set()
    package = _name(path) if path.name == "__init__.py" else _name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                ).strip(".")
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {name for name in found if name in known}


def test_no_import_cycles() -> None:
    known = {_name(p) for p in MODULES}
    graph = {_name(p): _imports(p, known) - {_name(p)} for p in MODULES}
    done: set[str] = set()
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(module: str) -> None:
        stack.append(module)
        on_stack.add(module)
        for dep in sorted(graph[module]):
            assert dep not in on_stack, " -> ".join([*stack[stack.index(dep) :], dep])
            if dep not in done:
                visit(dep)
        stack.pop()
        on_stack.discard(module)
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module)


def test_policies_import_nothing_from_the_edge() -> None:
    edge = ("proxy", "starlette", "uvicorn", "httpx", "httptools", "aiohttp")
    for path in MODULES:
        if _name(path).startswith("policies"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                )  # fmt: skip
                assert not any(n.split(".")[0] in edge for n in names), f"{_name(path)}: {names}"


def _requirement_names(requirements: list[str]) -> set[str]:
    return {
        re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements
    }


def test_the_packages_import_only_what_their_install_brings() -> None:
    """What `pip install context-curator[fast,postgres]` (the image's install) brings: the
    dependencies, their own dependencies (uvicorn[standard]'s uvloop, for one), and the two
    extras. A test-only package (aiohttp: the bench and the tests) would fail at startup."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    declared = _requirement_names(project["dependencies"] + extras["fast"] + extras["postgres"])
    test_only = _requirement_names(extras["test"]) - declared
    distributions = packages_distributions()
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )  # fmt: skip
            for top in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names):
                dists = {d.lower().replace("_", "-") for d in distributions.get(top, ())}
                assert not dists & test_only, f"{_name(path)} imports {top}, a test-only package"
