"""Text a coding agent's tools return: source files, pytest logs, grep hits, listings, JSON.

Every generator takes a `random.Random`, so the same seed always gives the same text. The
shapes follow what real agents see (numbered source lines, pytest's failure sections,
`path:line:` grep hits), because curators key on them: a tool-result truncator behaves
differently on a 700-line file than on a three-line JSON answer.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import zlib

PACKAGES = ("billing", "ingest", "auth", "reports", "scheduler", "storage", "webhooks")
MODULES = ("models", "service", "handlers", "utils", "client", "schema", "cache", "tasks")
NOUNS = (
    "invoice",
    "customer",
    "ledger",
    "payload",
    "session",
    "token",
    "batch",
    "record",
    "account",
    "retry",
    "window",
    "cursor",
    "event",
    "quota",
    "tenant",
    "snapshot",
)
VERBS = (
    "load",
    "parse",
    "build",
    "resolve",
    "fetch",
    "apply",
    "merge",
    "validate",
    "render",
    "flush",
    "compute",
    "normalize",
    "refresh",
    "encode",
    "dispatch",
    "reconcile",
)
# Real repositories carry non-ASCII text in comments, fixtures and messages; counting and
# cutting must survive it (multi-byte characters straddle token and byte boundaries).
UNICODE_SNIPPETS = (
    "Zürich",
    "naïve datetime",
    "café ☕",
    "日本語のテキスト",
    "测试数据",
    "Ελληνικά",
    "✅ done",
    "⚠️ deprecated",
    "→ next",
    "π ≈ 3.14159",
    "emoji 🚀🔥",
    "façade",
    "Ångström",
)
PROSE = (
    "The failure comes from the timezone conversion, not from the rounding step.",
    "I will read the module first so the patch matches the existing conventions.",
    "The test fixture builds the ledger with naive datetimes, which explains the offset.",
    "Running the focused tests first keeps the feedback loop short.",
    "The cache key ignores the tenant, so two tenants can read each other's entries.",
    "This helper is only called from the handlers, so changing its signature is safe.",
    "The retry loop swallows the original exception; we should chain it instead.",
    "Before touching the schema I want to see every call site of this function.",
    "The flaky test depends on dict ordering in the serialized payload.",
    "Let me check how the scheduler enqueues batches before changing the window size.",
)


def ident(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"


def module_path(rng: random.Random) -> str:
    return f"src/{rng.choice(PACKAGES)}/{rng.choice(MODULES)}.py"


def test_path(rng: random.Random) -> str:
    return f"tests/{rng.choice(PACKAGES)}/test_{rng.choice(MODULES)}.py"


def prose(rng: random.Random, sentences: int) -> str:
    return " ".join(rng.choice(PROSE) for _ in range(sentences))


def _function(rng: random.Random, name: str) -> list[str]:
    arg = rng.choice(NOUNS)
    lines = [
        f"def {name}({arg}: dict[str, object], *, strict: bool = False) -> list[str]:",
        f'    """{rng.choice(VERBS).capitalize()} the {arg} and return the names it touched."""',
        "    out: list[str] = []",
        f"    for key, value in sorted({arg}.items()):",
    ]
    for _ in range(rng.randint(2, 9)):
        other = rng.choice(NOUNS)
        kind = rng.random()
        if kind < 0.3:
            lines.append(
                f"        if strict and not isinstance(value, {rng.choice(('str', 'int'))}):"
            )
            lines.append(f'            raise ValueError(f"{other}: bad value {{value!r}}")')
        elif kind < 0.55:
            lines.append(f"        {other} = {ident(rng)}(value, limit={rng.randint(1, 500)})")
        elif kind < 0.7:
            lines.append(
                f"        # {rng.choice(UNICODE_SNIPPETS)}: keep {other} stable across runs"
            )
        else:
            lines.append(f'        out.append(f"{{key}}:{other}")')
    lines += ["    return out", "", ""]
    return lines


def _class(rng: random.Random) -> list[str]:
    name = rng.choice(NOUNS).capitalize() + rng.choice(("Service", "Store", "Client", "Job"))
    lines = [
        "@dataclass(frozen=True, slots=True)",
        f"class {name}:",
        f'    """Keeps {rng.choice(NOUNS)}s for one {rng.choice(NOUNS)}."""',
        "",
    ]
    for _ in range(rng.randint(2, 5)):
        lines.append(f"    {rng.choice(NOUNS)}_{rng.randint(1, 99)}: int = {rng.randint(0, 9)}")
    lines.append("")
    for body in _function(rng, ident(rng)):
        lines.append(f"    {body}" if body else "")
    return lines


def source_file(rng: random.Random, path: str, min_lines: int, *, numbered: bool) -> str:
    """A Python module of at least `min_lines` lines, optionally `cat -n` style numbered."""
    lines = [
        f'"""{path}: {prose(rng, 1)}"""',
        "",
        "from __future__ import annotations",
        "",
        "import logging",
        "from dataclasses import dataclass",
        "",
        f'log = logging.getLogger("{path.removesuffix(".py").replace("/", ".")}")',
        "",
        "",
    ]
    while len(lines) < min_lines:
        lines += _class(rng) if rng.random() < 0.3 else _function(rng, ident(rng))
    if numbered:
        return "\n".join(f"{n:>6}\t{text}" for n, text in enumerate(lines, 1))
    return "\n".join(lines)


def pytest_log(rng: random.Random, n_tests: int, failures: int) -> str:
    """Output of `pytest -q`-ish runs: progress, failure sections with tracebacks, summary."""
    files = sorted({test_path(rng) for _ in range(max(1, n_tests // 12))})
    head = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /workspace/app",
        "configfile: pyproject.toml",
        "plugins: hypothesis-6.100.1, timeout-2.3.1, asyncio-0.23.7",
        f"collected {n_tests} items",
        "",
    ]
    per_file = max(1, n_tests // len(files))
    progress = [f"{f} {'.' * per_file}{'F' if k < failures else ''}" for k, f in enumerate(files)]
    body: list[str] = []
    for k in range(failures):
        name = f"test_{ident(rng)}_{rng.choice(NOUNS)}"
        body += [f"_{'_' * 30} {name} {'_' * 30}", ""]
        for depth in range(rng.randint(3, 7)):
            fn = ident(rng)
            body += [
                f"{module_path(rng)}:{rng.randint(10, 900)}: in {fn}",
                f"    result = {ident(rng)}(payload, strict={depth % 2 == 0})",
            ]
        expected, got = rng.randint(0, 999), rng.randint(0, 999)
        body += [
            f"E   AssertionError: assert {got} == {expected}",
            f"E    +  where {got} = {ident(rng)}({{'tenant': '{rng.choice(UNICODE_SNIPPETS)}'}})",
            "",
            "----------------------------- Captured log call ------------------------------",
        ]
        body += [
            f"WARNING  {rng.choice(PACKAGES)}.{rng.choice(MODULES)}:{rng.randint(1, 400)} "
            f"{prose(rng, 1)}"
            for _ in range(rng.randint(1, 6))
        ]
        body.append(f"FAILED {files[k % len(files)]}::{name}")
    summary = (
        f"{'=' * 20} {failures} failed, {n_tests - failures} passed in "
        f"{rng.uniform(0.5, 40):.2f}s {'=' * 20}"
    )
    return "\n".join([*head, *progress, "", "=" * 30 + " FAILURES " + "=" * 30, *body, summary])


def grep_output(rng: random.Random, pattern: str, hits: int) -> str:
    rows = []
    for _ in range(hits):
        path = module_path(rng) if rng.random() < 0.7 else test_path(rng)
        rows.append(
            f"{path}:{rng.randint(1, 1200)}:    {pattern}({rng.choice(NOUNS)}, {ident(rng)})"
        )
    return "\n".join(sorted(rows))


def dir_listing(rng: random.Random, path: str) -> str:
    rows = [f"{path}/"]
    for module in sorted(rng.sample(MODULES, rng.randint(3, len(MODULES)))):
        rows.append(f"  {module}.py  ({rng.randint(1, 60)} KB)")
    for sub in sorted(rng.sample(NOUNS, rng.randint(1, 4))):
        rows.append(f"  {sub}/  ({rng.randint(2, 40)} entries)")
    return "\n".join(rows)


def json_document(rng: random.Random, records: int) -> str:
    """An API-style JSON answer, e.g. what a `http_get` or `run_command --json` returns."""
    items = [
        {
            "id": f"{rng.choice(NOUNS)}_{rng.getrandbits(40):010x}",
            "status": rng.choice(("ok", "pending", "failed", "retrying")),
            "amount": round(rng.uniform(0, 10_000), 2),
            "currency": rng.choice(("EUR", "USD", "JPY", "CHF")),
            "note": rng.choice(UNICODE_SNIPPETS),
            "tags": rng.sample(NOUNS, 3),
        }
        for _ in range(records)
    ]
    doc = {"object": "list", "has_more": rng.random() < 0.5, "data": items}
    return json.dumps(doc, indent=2, ensure_ascii=False)


def unified_diff(rng: random.Random, path: str) -> str:
    start = rng.randint(1, 400)
    old = [f"    {ident(rng)}(value)" for _ in range(rng.randint(1, 4))]
    new = [f"    {ident(rng)}(value, strict=True)" for _ in range(rng.randint(1, 5))]
    context = f"    # {rng.choice(UNICODE_SNIPPETS)}"
    return "\n".join(
        [
            f"--- a/{path}",
            f"+++ b/{path}",
            f"@@ -{start},{len(old) + 1} +{start},{len(new) + 1} @@",
            context,
            *(f"-{line}" for line in old),
            *(f"+{line}" for line in new),
        ]
    )


def png_data_url(width: int, height: int) -> str:
    """A valid grayscale PNG of this size as a data URL (its header carries the size)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(range(256)) * (width // 256) + bytes(width % 256)
    raw = zlib.compress(row * height, 9)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
