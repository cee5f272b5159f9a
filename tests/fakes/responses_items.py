"""Builders and hypothesis strategies for Responses API input items.

Conversations look like what the Agents SDK and Codex send with `store: false`: a
developer message, user turns (text or text + image parts), reasoning items with
encrypted content before the model's messages and calls, parallel function calls whose
outputs come back in any order (some 30 KB+), custom, shell and computer calls, hosted
tool items, MCP approvals, item references and compaction items.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from tests import factories as f

Item = dict[str, Any]
Draw = Callable[[st.SearchStrategy[Any]], Any]

short_text = st.sampled_from(
    ["Hello!", "Fix the failing test.", "Done; all green.", "données", "数据 🚀", ""]
)


def user(text: str = "Hello!") -> Item:
    return {"role": "user", "content": text}


def user_parts(text: str = "What is this?") -> Item:
    image = {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "low"}
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}, image],
    }


def developer(text: str = "Answer tersely.") -> Item:
    return {"type": "message", "role": "developer", "content": text}


def assistant(text: str = "Sure.", n: int = 0) -> Item:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {
        "type": "message",
        "id": f"msg_{n}",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }


def reasoning(n: int = 0, size: int = 400) -> Item:
    summary = [{"type": "summary_text", "text": f"Thinking about step {n}."}]
    blob = ("gAAAAABo" + "QkFTRTY0" * (size // 8))[:size]
    return {"type": "reasoning", "id": f"rs_{n}", "summary": summary, "encrypted_content": blob}


def function_call(call_id: str, name: str = "read_file", args: str = '{"path": "a.py"}') -> Item:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": args,
        "status": "completed",
    }


def function_output(call_id: str, output: str = "ok") -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def custom_call(call_id: str, text: str = "*** Begin Patch\n*** End Patch") -> Item:
    return {"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch", "input": text}


def custom_output(call_id: str, output: str = "Done!") -> Item:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}


def shell_call(call_id: str) -> Item:
    action = {"type": "exec", "command": ["ls", "-la"], "env": {}, "timeout_ms": 1000}
    return {
        "type": "local_shell_call",
        "id": f"lsh_{call_id}",
        "call_id": call_id,
        "action": action,
        "status": "completed",
    }


def shell_output(call_id: str, output: str = "total 0") -> Item:
    return {"type": "local_shell_call_output", "call_id": call_id, "output": output}


def computer_call(call_id: str) -> Item:
    action = {"type": "click", "button": "left", "x": 10, "y": 20}
    return {
        "type": "computer_call",
        "id": f"cu_{call_id}",
        "call_id": call_id,
        "action": action,
        "pending_safety_checks": [],
        "status": "completed",
    }


def computer_output(call_id: str) -> Item:
    shot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    return {"type": "computer_call_output", "call_id": call_id, "output": shot}


def hosted(kind: str, n: int = 0) -> Item:
    bodies: dict[str, Item] = {
        "web_search_call": {"action": {"type": "search", "query": "weather"}},
        "file_search_call": {"queries": ["refund policy"], "results": None},
        "code_interpreter_call": {"code": "print(1)", "container_id": "cntr_1", "outputs": None},
        "image_generation_call": {"result": "iVBORw0KGgo" * 20},
        "mcp_call": {
            "server_label": "docs",
            "name": "search",
            "arguments": "{}",
            "output": "found",
        },
        "mcp_list_tools": {
            "server_label": "docs",
            "tools": [{"name": "search", "input_schema": {}}],
        },
    }
    return {"type": kind, "id": f"{kind[:3]}_{n}", "status": "completed", **bodies[kind]}


def approval_request(n: int) -> Item:
    return {
        "type": "mcp_approval_request",
        "id": f"mcpr_{n}",
        "server_label": "docs",
        "name": "delete",
        "arguments": "{}",
    }


def approval_response(n: int, approve: bool = True) -> Item:
    return {"type": "mcp_approval_response", "approval_request_id": f"mcpr_{n}", "approve": approve}


def item_reference(n: int) -> Item:
    return {"type": "item_reference", "id": f"msg_ref{n}"}


def compaction(n: int) -> Item:
    return {"type": "compaction", "id": f"cmp_{n}", "encrypted_content": "Q09NUEFDVA" * 30}


HOSTED = (
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
)


@st.composite
def outputs(draw: Draw) -> str:
    """Tool output: a word, or hundreds to thousands of tokens (the largest 30 KB+)."""
    if draw(st.booleans()):
        return draw(short_text)
    word = draw(st.sampled_from(["lorem", "line", "données"]))
    return f.long_text(draw(st.one_of(st.integers(40, 400), st.integers(3500, 4500))), word)


@st.composite
def steps(draw: Draw, counter: Callable[[], int]) -> list[Item]:
    """One step of an agent loop, the reasoning it needs included."""
    n = counter()
    think = [reasoning(n, draw(st.sampled_from([200, 2000, 12000])))] if draw(st.booleans()) else []
    kind = draw(
        st.sampled_from(
            ["say", "calls", "custom", "shell", "computer", "hosted", "approval", "opaque", "user"]
        )
    )
    if kind == "say":
        return [*think, assistant(draw(short_text), n)]
    if kind == "calls":
        ids = [f"call_{n}_{k}" for k in range(draw(st.integers(1, 3)))]
        calls = [
            function_call(i, draw(st.sampled_from(["read_file", "run_tests", "search"])))
            for i in ids
        ]
        results = [function_output(i, draw(outputs())) for i in draw(st.permutations(ids))]
        said = [assistant(draw(short_text), n)] if draw(st.booleans()) else []
        return [*think, *said, *calls, *results]
    if kind == "custom":
        return [*think, custom_call(f"ct_{n}"), custom_output(f"ct_{n}", draw(outputs()))]
    if kind == "shell":
        return [*think, shell_call(f"sh_{n}"), shell_output(f"sh_{n}", draw(outputs()))]
    if kind == "computer":
        return [*think, computer_call(f"cu_{n}"), computer_output(f"cu_{n}")]
    if kind == "hosted":
        return [*think, hosted(draw(st.sampled_from(HOSTED)), n)]
    if kind == "approval":
        answered = draw(st.booleans())
        return [approval_request(n), *([approval_response(n)] if answered else [])]
    if kind == "opaque":
        return [draw(st.sampled_from([item_reference(n), compaction(n)]))]
    return [user(draw(short_text))]


@st.composite
def conversations(draw: Draw, max_steps: int = 8) -> list[Item]:
    """A valid Responses `input`: an optional developer message, a task, agent steps."""
    numbers = itertools.count()
    items: list[Item] = [developer()] if draw(st.booleans()) else []
    items.append(user_parts() if draw(st.booleans()) else user("Fix the failing test."))
    for _ in range(draw(st.integers(0, max_steps))):
        items.extend(draw(steps(lambda: next(numbers))))
    if draw(st.booleans()):
        items.append(user(draw(short_text)))
    return items
