"""A Claude-Code-shaped Messages session, generated: what `claude` sends turn after turn.

Each request has what a real Claude Code request has: 26 tool definitions (Claude Code's
own names, descriptions of its sizes), three system blocks each marked
`cache_control`, extended thinking, a `context_management` `clear_thinking` edit, and the
whole conversation so far with one breakpoint on the newest block. The conversation is
tool loops: the model thinks, says a line and calls a tool (Read, Grep, Bash, Edit, ...),
the result comes back (a file, a listing, a log: 100 to 8,000 characters, some far
larger), and every dozen requests the model answers and the user asks the next thing.
Thinking is signed as the strict fake signs it, so the fake accepts it back unedited.
Deterministic: the same seed gives the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from tests.fakes.anthropic_rules import sign

MODEL = "claude-sonnet-4-5"
TOOL_NAMES = (
    "Task", "Bash", "Glob", "Grep", "LS", "ExitPlanMode", "Read", "Edit", "MultiEdit",
    "Write", "NotebookEdit", "WebFetch", "TodoWrite", "WebSearch", "BashOutput", "KillShell",
    "SlashCommand", "AskUserQuestion", "Skill", "EnterPlanMode", "ListMcpResourcesTool",
    "ReadMcpResourceTool", "NotebookRead", "TaskOutput", "mcp__ide__getDiagnostics",
    "mcp__ide__executeCode",
)  # fmt: skip
CALLED = ("Read", "Grep", "Bash", "Edit", "Glob", "Read", "Bash", "Read")
WORDS = (
    "def", "return", "self", "import", "class", "config", "request", "response", "handler",
    "value", "items", "for", "in", "if", "else", "None", "True", "await", "async", "raise",
    "error", "path", "token", "cache", "index", "count", "route", "policy", "stream", "yield",
)  # fmt: skip
EPHEMERAL = {"type": "ephemeral"}


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def code(rng: random.Random, chars: int) -> str:
    """Code-like lines, numbered as Claude Code's Read numbers them, about `chars` long."""
    lines: list[str] = []
    size = 0
    while size < chars:
        line = f"{len(lines) + 1:>6}\t{'    ' * rng.randint(0, 3)}{words(rng, rng.randint(2, 12))}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def tools(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for name in TOOL_NAMES:
        props = {
            f"{w}_{i}": {"type": "string", "description": words(rng, 12)}
            for i, w in enumerate(rng.sample(WORDS, rng.randint(1, 5)))
        }
        schema = {"type": "object", "properties": props, "required": list(props)[:1]}
        description = f"{name}: " + words(rng, rng.randint(60, 600))
        out.append({"name": name, "description": description, "input_schema": schema})
    return out


def system(rng: random.Random) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
         "cache_control": EPHEMERAL},
        {"type": "text", "text": words(rng, 4000), "cache_control": EPHEMERAL},
        {"type": "text", "text": "<env>\n" + words(rng, 300) + "\n</env>",
         "cache_control": EPHEMERAL},
    ]  # fmt: skip


def result_text(rng: random.Random, tool: str) -> str:
    chars = rng.choice((300, 1200, 2500, 5000, 8000, 20_000)) if tool != "Edit" else 200
    return code(rng, chars)


def assistant_turn(rng: random.Random, step: int, final: bool) -> list[dict[str, Any]]:
    thought = f"step {step}: " + words(rng, rng.randint(20, 120))
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": thought, "signature": sign(thought)},
        {"type": "text", "text": words(rng, rng.randint(5, 60 if final else 25))},
    ]
    if not final:
        tool = rng.choice(CALLED)
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{step:05d}", "name": tool,
             "input": {"path": f"src/mod_{rng.randint(0, 40)}.py"}}
        )  # fmt: skip
    return blocks


def session(turns: int = 100, seed: int = 7) -> Iterator[dict[str, Any]]:
    """The `turns` request bodies of one session, in order."""
    rng = random.Random(seed)
    head = {"tools": tools(rng), "system": system(rng)}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [
            {"type": "text", "text": f"<system-reminder>\n{words(rng, 500)}\n</system-reminder>"},
            {"type": "text", "text": "Fix the failing tests in src/ and explain the cause."},
        ]}
    ]  # fmt: skip
    for step in range(turns):
        yield body_of(head, messages)
        final = step % 12 == 11
        reply = assistant_turn(rng, step, final)
        messages = [*messages, {"role": "assistant", "content": reply}]
        if final:
            ask = {"type": "text", "text": "Now " + words(rng, rng.randint(8, 40))}
            messages.append({"role": "user", "content": [ask]})
            continue
        use = reply[-1]
        result = {"type": "tool_result", "tool_use_id": use["id"],
                  "content": result_text(rng, use["name"])}  # fmt: skip
        messages.append({"role": "user", "content": [result]})


def body_of(head: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A request: one breakpoint, on the newest block, as Claude Code marks it."""
    marked = [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
        }
        for m in messages
    ]
    last = marked[-1]["content"]
    last[-1] = {**last[-1], "cache_control": EPHEMERAL}
    return {
        "model": MODEL,
        "max_tokens": 32_000,
        "thinking": {"type": "enabled", "budget_tokens": 16_000},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "system": head["system"],
        "tools": head["tools"],
        "messages": marked,
        "stream": True,
    }
