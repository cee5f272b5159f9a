"""Warm curation of the 127k-token request as a Responses request vs as chat completions.

Run: `TIKTOKEN_CACHE_DIR=../shared/tiktoken .venv/bin/python -m bench.responses_bench`.
The same conversation (`large_request()`) is sent both ways: as chat completions, and
converted to Responses items (the system prompt as `instructions`, each assistant step's
text as a message item and its calls as `function_call` items, each result as a
`function_call_output`; with `--reasoning`, every assistant step also carries a reasoning
item with 1.7 KB of encrypted content, which the chat form has no equivalent of). Each run
does what the proxy does for one request: parse the body through its protocol, run the
coding-agent policy for a 32,768-token window, rebuild the body. Warm: the same bytes
every run, so the counter's caches are hot, as when an agent resends its history. Chat
and Responses runs alternate, so both see the same machine. A round is `--runs` of each
in a new process (a process's memory layout favours one form by a few percent for its
whole life); `--rounds` of them (5), and the table shows the median round, every round's
ratio printed above the verdict. Target: the Responses median within 10% of the chat
median. Prints the table, asserts nothing.
"""

from __future__ import annotations

import argparse
import base64
import gc
import hashlib
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import orjson

from bench.conversations import large_request
from bench.procs import python_env
from policies.loader import load_preset
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.tokens import TokenCounter
from proxy.config.limits import Limits
from proxy.protocols.base import WireProtocol
from proxy.protocols.chat import CHAT
from proxy.protocols.responses.protocol import RESPONSES
from proxy.serving.server import GC_YOUNG_THRESHOLD, freeze_survivors

MODEL = "bench-32k"
WINDOW = 32_768
TARGET = 1.10
LIMITS = Limits()


def to_responses(body: dict[str, Any], reasoning: bool = False) -> dict[str, Any]:
    """The chat body as a Responses body of the same conversation."""
    messages = body["messages"]
    instructions = "\n".join(m["content"] for m in messages if m["role"] == "system")
    items: list[dict[str, Any]] = []
    for n, msg in enumerate(messages):
        role = msg["role"]
        if role == "system":
            continue
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": msg["tool_call_id"],
                    "output": msg["content"],
                }
            )
        elif role == "assistant":
            items.extend(_assistant(n, msg, reasoning))
        else:
            items.append({"type": "message", "role": role, "content": _parts(msg["content"])})
    # The same tools (Responses' flat function shape) and settings, so both forms price the
    # same tool definitions and reserve the same reply.
    tools = [{"type": "function", **t["function"]} for t in body.get("tools") or ()]
    return {
        "model": body["model"],
        "instructions": instructions,
        "input": items,
        "tools": tools,
        "tool_choice": body.get("tool_choice", "auto"),
        "temperature": body.get("temperature"),
        "max_output_tokens": body.get("max_completion_tokens"),
        "store": False,
    }


def _assistant(n: int, msg: dict[str, Any], reasoning: bool) -> list[dict[str, Any]]:
    seed = hashlib.sha256(str(n).encode()).digest() * 40
    thought = {
        "type": "reasoning",
        "id": f"rs_{n}",
        "summary": [],
        "encrypted_content": base64.b64encode(seed).decode(),
    }
    out: list[dict[str, Any]] = [thought] if reasoning else []
    if msg.get("content"):
        part = {"type": "output_text", "text": msg["content"], "annotations": []}
        out.append({"type": "message", "role": "assistant", "id": f"msg_{n}", "content": [part]})
    for call in msg.get("tool_calls") or ():
        fn = call["function"]
        out.append(
            {
                "type": "function_call",
                "id": f"fc_{call['id']}",
                "call_id": call["id"],
                "name": fn["name"],
                "arguments": fn["arguments"],
            }
        )
    return out


def _parts(content: object) -> object:
    if not isinstance(content, list):
        return content
    out: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "text":
            out.append({"type": "input_text", "text": part["text"]})
        elif part.get("type") == "image_url":
            image = part["image_url"]
            out.append(
                {
                    "type": "input_image",
                    "image_url": image["url"],
                    "detail": image.get("detail", "auto"),
                }
            )
    return out


def run_ms(protocol: WireProtocol, raw: bytes, policy: Policy, counter: TokenCounter) -> float:
    """One request as the proxy handles it: parse, curate, rebuild."""
    start = time.perf_counter()
    request = protocol.parse(raw, LIMITS)
    assert request.skip is None, request.skip
    result = policy.curate(request.messages, request.facts, counter)
    assert result.changed  # the figure must measure curation
    protocol.rebuild(request, result.messages)
    return (time.perf_counter() - start) * 1000


def one_round(runs: int, reasoning: bool) -> dict[str, float]:
    """Warm medians (ms) of both forms, measured in this process."""
    table = ModelTable.with_overrides([(MODEL, ModelInfo(WINDOW, encoding="o200k_base"))])
    counter = TokenCounter(table)
    policy = load_preset("coding-agent")
    chat = large_request(model=MODEL)
    bodies: dict[WireProtocol, bytes] = {
        CHAT: orjson.dumps(chat),
        RESPONSES: orjson.dumps(to_responses(chat, reasoning)),
    }
    # The process as `curator serve` prepares it: startup objects out of the GC's sight,
    # young collections at the server's threshold (`proxy.serving.server`).
    freeze_survivors()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
    times: dict[WireProtocol, list[float]] = {CHAT: [], RESPONSES: []}
    for k in range(runs + 2):
        for protocol, raw in bodies.items():
            spent = run_ms(protocol, raw, policy, counter)
            if k >= 2:  # the first runs fill the caches
                times[protocol].append(spent)
    return {
        "chat_ms": statistics.median(times[CHAT]),
        "responses_ms": statistics.median(times[RESPONSES]),
        "chat_kib": len(bodies[CHAT]) / 1024,
        "responses_kib": len(bodies[RESPONSES]) / 1024,
    }


def fresh_round(runs: int, reasoning: bool) -> dict[str, float]:
    """`one_round` in a new interpreter: a process's own memory layout favours one form
    or the other by a few percent, for the whole of its life."""
    argv = [sys.executable, "-m", "bench.responses_bench", "--one-round", "--runs", str(runs)]
    out = subprocess.run(
        [*argv, *(["--reasoning"] if reasoning else [])],
        capture_output=True,
        text=True,
        check=True,
        env=python_env(),
    ).stdout
    found: dict[str, float] = json.loads(out.splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="timed requests per form a round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each in a new process")
    parser.add_argument("--reasoning", action="store_true", help="add reasoning items")
    parser.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_round:
        print(json.dumps(one_round(args.runs, args.reasoning)))
        return
    rounds = [fresh_round(args.runs, args.reasoning) for _ in range(max(1, args.rounds))]
    rounds.sort(key=lambda r: r["responses_ms"] / r["chat_ms"])
    mid = rounds[len(rounds) // 2]
    ratios = ", ".join(f"{r['responses_ms'] / r['chat_ms']:.3f}" for r in rounds)
    print("| request | body | warm p50 |")
    print("|---|---|---|")
    print(f"| chat completions | {mid['chat_kib']:.0f} KiB | {mid['chat_ms']:.2f} ms |")
    print(f"| Responses | {mid['responses_kib']:.0f} KiB | {mid['responses_ms']:.2f} ms |")
    ratio = mid["responses_ms"] / mid["chat_ms"]
    met = "met" if ratio <= TARGET else "NOT met"
    print(f"\nrounds, sorted: {ratios} (the table shows the median round)")
    print(f"Responses / chat: {ratio:.3f} (target <= {TARGET}: {met})")


if __name__ == "__main__":
    main()
