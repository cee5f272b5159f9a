"""A scripted model for Claude Code (`claude -p`) against the strict fake Messages server.

It drives a two-step tool task by what the conversation already holds: no tool result
yet, it asks to run `ls` (Claude Code's `Bash` tool); after one, it asks to `Read` the file
the listing showed; after two, it answers with what the file said. Requests without tools
(Claude Code's side calls: titles, topic checks) get a one-word answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.anthropic_upstream import Reply, ToolUse

FINAL = "The note says: "
_NUMBER = re.compile(r"^\s*\d+[\t\u2192]")


def tool_results(body: dict[str, Any]) -> list[str]:
    """Every tool result's text, in order."""
    out = []
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append(_text(block.get("content")))
    return out


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


def ls_then_read(workdir: Path, name: str) -> Callable[[dict[str, Any]], Reply]:
    """The model: `ls`, then read `name` in `workdir`, then answer with its first line."""

    def reply(body: dict[str, Any]) -> Reply:
        names = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
        if not {"Bash", "Read"} <= names:
            return Reply(text="Files")
        results = tool_results(body)
        # With thinking on (Claude Code's adaptive thinking), every turn starts with a signed
        # thinking block, which Claude Code sends back and the fake checks.
        think = "Planning the next step." if body.get("thinking") else None
        if not results:
            command = {"command": "ls", "description": "List the files"}
            uses = (ToolUse("Bash", command),)
            return Reply(text="Listing the files.", tool_uses=uses, thinking=think)
        if len(results) == 1:
            uses = (ToolUse("Read", {"file_path": str(workdir / name)}),)
            return Reply(text="Reading it.", tool_uses=uses, thinking=think)
        # Claude Code's Read numbers the lines it shows ("1\t..." or "     1→...").
        lines = [_NUMBER.sub("", ln) for ln in results[-1].splitlines() if ln.strip()]
        return Reply(text=FINAL + (lines[0] if lines else "(empty)"), thinking=think)

    return reply
