"""The coding agent's tool definitions, and realistic (arguments, output) pairs for each."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from bench import corpus

Args = dict[str, Any]


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Args:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_STR = {"type": "string"}
TOOLS: list[Args] = [
    _tool(
        "read_file",
        "Read a file. Returns its lines numbered like `cat -n`.",
        {"path": _STR, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}},
        ["path"],
    ),
    _tool(
        "grep",
        "Search files for a regular expression. Returns `path:line: text` hits.",
        {"pattern": _STR, "path": _STR, "glob": _STR},
        ["pattern"],
    ),
    _tool(
        "run_tests",
        "Run pytest with the given arguments and return its output.",
        {"args": {"type": "array", "items": _STR}},
        [],
    ),
    _tool("list_dir", "List a directory with sizes.", {"path": _STR}, ["path"]),
    _tool(
        "apply_patch",
        "Apply a unified diff to the working tree.",
        {"patch": _STR},
        ["patch"],
    ),
    _tool(
        "run_command",
        "Run a shell command in the repository and return stdout and stderr.",
        {"command": _STR, "timeout_s": {"type": "integer"}},
        ["command"],
    ),
]


def _grown(make: Callable[[int], str], start: int, min_bytes: int) -> str:
    """Call `make(size)` with sizes growing by a quarter until its output reaches `min_bytes`
    (small steps, so big outputs land just past the mark, as a harness's cut would)."""
    size = start
    text = make(size)
    while len(text.encode("utf-8")) < min_bytes:
        size = size * 5 // 4 + 1
        text = make(size)
    return text


def _read_file(rng: random.Random, big: bool, min_bytes: int) -> tuple[Args, str]:
    path = corpus.module_path(rng)
    numbered = rng.random() < 0.8
    seed = rng.getrandbits(32)

    def make(lines: int) -> str:
        return corpus.source_file(random.Random(seed), path, lines, numbered=numbered)

    if big:
        return {"path": path}, _grown(make, 700, min_bytes)
    lines = rng.randint(30, 220)
    if rng.random() < 0.4:
        start = rng.randint(1, 300)
        return {"path": path, "start_line": start, "end_line": start + lines}, make(lines)
    return {"path": path}, make(lines)


def _run_tests(rng: random.Random, big: bool, min_bytes: int) -> tuple[Args, str]:
    args = rng.choice((["-x", "-q"], ["-q", corpus.test_path(rng)], ["-k", corpus.ident(rng)]))
    seed = rng.getrandbits(32)
    if big:
        text = _grown(lambda n: corpus.pytest_log(random.Random(seed), 40 * n, n), 30, min_bytes)
        return {"args": args}, text
    tests = rng.randint(8, 250)
    failures = rng.choice((0, 0, 1, 1, 2, 3))
    return {"args": args}, corpus.pytest_log(random.Random(seed), tests, min(failures, tests))


def _grep(rng: random.Random, big: bool, min_bytes: int) -> tuple[Args, str]:
    pattern = corpus.ident(rng)
    seed = rng.getrandbits(32)
    if big:
        return {"pattern": pattern}, _grown(
            lambda n: corpus.grep_output(random.Random(seed), pattern, n), 400, min_bytes
        )
    args: Args = {"pattern": pattern, "path": "src"} if rng.random() < 0.5 else {"pattern": pattern}
    return args, corpus.grep_output(rng, pattern, rng.randint(0, 45)) or "(no matches)"


def _list_dir(rng: random.Random, big: bool, min_bytes: int) -> tuple[Args, str]:
    del big, min_bytes  # a listing is never large
    path = f"src/{rng.choice(corpus.PACKAGES)}"
    return {"path": path}, corpus.dir_listing(rng, path)


def _apply_patch(rng: random.Random, big: bool, min_bytes: int) -> tuple[Args, str]:
    del big, min_bytes  # patch results are one line
    path = corpus.module_path(rng)
    patch = corpus.unified_diff(rng, path)
    if rng.random() < 0.15:
        return {"patch": patch}, f"error: patch failed: {path}:{rng.randint(1, 400)}\n" + (
            "error: while searching for:\n" + patch.splitlines()[3]
        )
    return {"patch": patch}, f"Applied patch to {path}: 1 hunk, {rng.randint(1, 9)} lines changed."


def _run_command(rng: random.Random, big: bool, min_bytes: int) -> tuple[Args, str]:
    command = f"python -m app.cli {rng.choice(corpus.VERBS)} --json"
    seed = rng.getrandbits(32)
    if big:
        return {"command": command}, _grown(
            lambda n: corpus.json_document(random.Random(seed), n), 120, min_bytes
        )
    return {"command": command}, corpus.json_document(rng, rng.randint(1, 25))


_OUTPUTS: dict[str, Callable[[random.Random, bool, int], tuple[Args, str]]] = {
    "read_file": _read_file,
    "run_tests": _run_tests,
    "grep": _grep,
    "list_dir": _list_dir,
    "apply_patch": _apply_patch,
    "run_command": _run_command,
}


def tool_output(rng: random.Random, name: str, *, big: bool, min_bytes: int) -> tuple[Args, str]:
    """Arguments for a call of tool `name` and what the tool returns; `big` makes the
    output at least `min_bytes` long (tools that never answer at length ignore it)."""
    return _OUTPUTS[name](rng, big, min_bytes)
