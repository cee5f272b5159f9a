"""Deterministic, realistic coding-agent conversations for benchmarks and end-to-end tests.

A session is a system prompt, a user task, then steps: the assistant thinks aloud and calls
tools (often several in parallel), the tools answer with source files, pytest logs, grep
hits or JSON (some over 30 KB), and now and then the assistant reports back and the user
follows up, sometimes with a screenshot. Every list is valid OpenAI ordering.

The same seed always gives the same conversation. Token targets are met approximately with
the project's own counter (tiktoken when `TIKTOKEN_CACHE_DIR` holds the BPE files).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from typing import Any

from bench import corpus
from bench.tools import TOOLS, tool_output
from policies.tokens import REPLY_PRIMING, TokenCounter

Msg = dict[str, Any]

DEFAULT_MODEL = "gpt-4o"
LARGE_TOKENS = 127_000
LARGE_MIN_MESSAGES = 110
BIG_OUTPUT_BYTES = 30_000
TOOL_MIX = (
    *("read_file", "read_file", "read_file", "grep", "grep", "run_tests", "list_dir"),
    *("apply_patch", "apply_patch", "run_command"),
)
"""Which tools the agent calls, weighted by repetition: mostly reading and searching."""
BIG_TOOLS = ("read_file", "read_file", "run_tests", "grep", "run_command")
FOLLOW_UP_ROOM = 3_000
TARGET_SLACK = 0.02
"""How far past the token target a session may end before its last step is trimmed."""

SYSTEM_PROMPT = """You are an autonomous coding agent working in a Git repository at /workspace/app.
You can read files, search the code, list directories, run commands and tests, and apply
patches. Work in small verified steps:

1. Understand the task. Read the relevant code before changing it; never guess an API.
2. Reproduce failures with the narrowest test command that shows them.
3. Make the smallest change that fixes the root cause. Keep the project's style: type
   hints everywhere, dataclasses for records, no module-level mutable state.
4. Run the focused tests, then the whole suite. Do not stop while tests fail.
5. Report what you changed and why, in a few sentences, with file paths.

Tool use: call several independent tools in parallel when you can (for example, read two
files at once). Paths are relative to the repository root. Patches use unified diff
format. Outputs longer than 30,000 characters are cut by the harness.

Never print secrets. Never push. Ask the user only when the task is ambiguous."""

TASKS = (
    "The nightly reconcile job crashes with `ValueError: tenant: bad value None` since "
    "yesterday's deploy. Find the cause, fix it, and add a regression test.",
    "Invoices rendered for Zürich customers show amounts one hour off. Make the ledger use "
    "timezone-aware datetimes end to end; keep the public API unchanged.",
    "tests/billing/test_service.py is flaky on CI (about 1 run in 20). Find out why and make "
    "it deterministic without sleeping.",
    "Add a `--dry-run` flag to the scheduler CLI that prints the batches it would enqueue "
    "instead of enqueuing them. Document it in the README.",
    "The webhooks retry loop hides the original exception. Chain exceptions properly and "
    "make the retry window configurable (default 30 s).",
)
FOLLOW_UPS = (
    "Thanks. Can you also make sure the CLI prints a summary at the end?",
    "The CI log still shows one failure on Python 3.12, see the screenshot.",
    "Looks good, but please don't change the public function names. Revert that part.",
    "Also run the linters (ruff, mypy) and fix what they report.",
    "One more thing: the error message should name the tenant (e.g. «café ☕ GmbH»).",
    "Can you split the change into a refactor and the fix? Keep the tests passing in both.",
)


def coding_agent_session(seed: int, target_tokens: int, model: str = DEFAULT_MODEL) -> list[Msg]:
    """A conversation of about `target_tokens` prompt tokens that ends awaiting the model."""
    session = _Session(seed, model)
    while session.tokens < target_tokens:
        session.add_step(room=target_tokens - session.tokens)
    return session.messages


def growing_requests(
    seed: int, turns: int, model: str = DEFAULT_MODEL, *, stream: bool = False
) -> Iterator[Msg]:
    """Successive request bodies of one conversation, each its predecessor plus new messages.

    This is how agents call the API: they resend the whole history every turn, so message
    dicts of earlier bodies reappear unchanged (the same objects) in later ones.
    """
    session = _Session(seed, model, count=False)
    for turn in range(turns):
        if turn:
            session.add_step(room=None)
        yield request_body(session.messages, model, stream=stream)


def large_request(seed: int = 7, model: str = DEFAULT_MODEL) -> Msg:
    """The 127k-token request: 110+ messages, parallel tool calls, 30 KB tool outputs."""
    return request_body(coding_agent_session(seed, LARGE_TOKENS, model), model)


def small_request(model: str = DEFAULT_MODEL, seed: int = 1) -> Msg:
    """A short exchange (about 1 KB): a task, one tool call and its answer."""
    rng = random.Random(seed)
    messages: list[Msg] = [
        {"role": "system", "content": "You are a helpful coding assistant."},
        {"role": "user", "content": "What does src/billing/utils.py export?"},
    ]
    step = _tool_step(rng, calls=1, kinds=("list_dir",))
    return request_body(messages + step, model)


def request_body(messages: list[Msg], model: str, *, stream: bool = False) -> Msg:
    body: Msg = {
        "model": model,
        "messages": list(messages),
        "tools": TOOLS,
        "tool_choice": "auto",
        "temperature": 0.2,
        "max_completion_tokens": 4096,
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def call_id(rng: random.Random) -> str:
    return "call_" + "".join(rng.choices(string.ascii_letters + string.digits, k=24))


class _Session:
    """Grows one conversation step by step; counts tokens as it goes when asked to."""

    def __init__(self, seed: int, model: str, *, count: bool = True) -> None:
        self.rng = random.Random(seed)
        self.model = model
        self.counter = TokenCounter() if count else None
        self.messages: list[Msg] = []
        self.tokens = 0
        self.steps = 0
        task = self.rng.choice(TASKS)
        self._extend([{"role": "system", "content": SYSTEM_PROMPT}, _user(task)])

    def add_step(self, room: int | None) -> None:
        """Append one step. With `room`, trim a step that would overshoot the target."""
        self.steps += 1
        rng = self.rng
        # Follow-ups carry images, which cannot be trimmed: none when little room is left.
        if self.steps > 3 and rng.random() < 0.12 and (room is None or room > FOLLOW_UP_ROOM):
            step = [_report(rng), _follow_up(rng)]
        else:
            # Early steps are parallel reads, as agents orient themselves first.
            calls = 3 if self.steps == 1 else rng.choice((1, 1, 1, 2, 2, 3, 4))
            step = _tool_step(rng, calls, big=self.steps % 9 == 4 or rng.random() < 0.03)
        if room is not None and self.counter is not None:
            step = self._fit(step, room)
        self._extend(step)

    def _extend(self, step: list[Msg]) -> None:
        # Counting only the new messages keeps a long session linear, not quadratic.
        if self.counter is not None:
            if not self.messages:
                self.tokens = REPLY_PRIMING
            self.tokens += sum(self.counter.count_message(m, self.model) for m in step)
        self.messages.extend(step)

    def _fit(self, step: list[Msg], room: int) -> list[Msg]:
        """Cut the step's tool outputs (by lines, evenly) so the session lands near target."""
        assert self.counter is not None
        cost = sum(self.counter.count_message(m, self.model) for m in step)
        excess = cost - room - int(room * TARGET_SLACK)
        results = [m for m in step if m["role"] == "tool"]
        if excess <= 0 or not results:
            return step
        cuttable = sum(self.counter.count_message(m, self.model) for m in results)
        keep = max(0.0, 1 - excess / max(cuttable, 1))
        return [_keep_lines(m, keep) if m["role"] == "tool" else m for m in step]


def _keep_lines(msg: Msg, fraction: float) -> Msg:
    lines = msg["content"].splitlines()
    return {**msg, "content": "\n".join(lines[: max(1, int(len(lines) * fraction))])}


def _user(text: str) -> Msg:
    return {"role": "user", "content": text}


def _tool_step(
    rng: random.Random, calls: int, *, big: bool = False, kinds: tuple[str, ...] = ()
) -> list[Msg]:
    """An assistant message with `calls` tool calls, then one result per call, in order."""
    names = kinds or tuple(rng.choice(TOOL_MIX) for _ in range(calls))
    if big:
        names = (rng.choice(BIG_TOOLS), *names[1:])
    specs = []
    for k, name in enumerate(names):
        args, output = tool_output(rng, name, big=big and k == 0, min_bytes=BIG_OUTPUT_BYTES)
        specs.append((call_id(rng), name, args, output))
    thought = corpus.prose(rng, rng.randint(1, 3)) if rng.random() < 0.7 else None
    assistant: Msg = {
        "role": "assistant",
        "content": thought,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
            }
            for cid, name, args, _ in specs
        ],
    }
    results = [{"role": "tool", "tool_call_id": cid, "content": out} for cid, _, _, out in specs]
    return [assistant, *results]


def _report(rng: random.Random) -> Msg:
    changed = ", ".join(sorted({corpus.module_path(rng) for _ in range(rng.randint(1, 3))}))
    text = (
        f"Done. I changed {changed}. {corpus.prose(rng, 2)} "
        f"All {rng.randint(40, 400)} tests pass locally ✅."
    )
    return {"role": "assistant", "content": text}


def _follow_up(rng: random.Random) -> Msg:
    text = rng.choice(FOLLOW_UPS)
    if "screenshot" not in text and rng.random() > 0.25:
        return _user(text)
    width, height = rng.choice(((1280, 800), (1920, 1080), (800, 600)))
    detail = rng.choice(("low", "high", "auto"))
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": text},
            {
                "type": "image_url",
                "image_url": {"url": corpus.png_data_url(width, height), "detail": detail},
            },
        ],
    }
