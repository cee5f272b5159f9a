from __future__ import annotations

import base64
import logging
import random
import struct
import threading
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import tokens as tokens_module
from policies.encoders import Encoder, EstimatingEncoder
from policies.images import LOW_DETAIL, MAX_IMAGE_TOKENS
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy, tool_list
from policies.tokens import REPLY_PRIMING, TokenCounter
from tests import factories as f
from tests.factories import CharEncoder, failing_loader

COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities "
        "for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]


def char_counter(**kwargs: Any) -> tuple[TokenCounter, dict[str, CharEncoder]]:
    made: dict[str, CharEncoder] = {}

    def loader(name: str) -> CharEncoder:
        made[name] = CharEncoder(name)
        return made[name]

    return TokenCounter(loader=loader, **kwargs), made


def png_url(width: int, height: int) -> str:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", width, height)
    return "data:image/png;base64," + base64.b64encode(header + b"\x08\x02\0\0\0").decode()


# -- the formula ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "prompt_tokens"),
    [("gpt-3.5-turbo", 129), ("gpt-4-0613", 129), ("gpt-4", 129), ("gpt-4o", 124)],
)
def test_cookbook_messages_example(exact: TokenCounter, model: str, prompt_tokens: int) -> None:
    # "How to count tokens with tiktoken", section 6: the API reported the same numbers.
    assert exact.count_messages(COOKBOOK_MESSAGES, model) == prompt_tokens


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        ({"role": "user", "content": "hello"}, 3 + 4 + 5),
        ({"role": "system", "name": "example_user", "content": "hi"}, 3 + 6 + 12 + 1 + 2),
        ({"role": "tool", "tool_call_id": "call_1", "content": "found"}, 3 + 4 + 6 + 5),
        ({"role": "function", "name": "f", "content": "ok"}, 3 + 8 + 1 + 1 + 2),
        ({"role": "assistant", "content": "x", "audio": {"id": "a1"}, "n": 5}, 3 + 9 + 1),
        ({"role": "assistant", "content": None, "refusal": "nope"}, 3 + 9 + 4),
        ({}, 3),
    ],
)
def test_three_per_message_plus_every_string_value_plus_one_per_name(
    message: dict[str, Any], tokens: int
) -> None:
    counter, _ = char_counter()
    assert counter.count_message(message, "gpt-4o") == tokens


def test_tool_calls_count_each_calls_overhead_id_name_and_arguments() -> None:
    counter, _ = char_counter()
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "ls", "arguments": '{"a":1}'},
            },
            {"id": "call_3", "type": "custom", "custom": {"name": "sql", "input": "select 1"}},
            "garbage",
        ],
    }
    calls = (3 + 6 + 4 + 2) + (3 + 6 + 2 + 7) + (3 + 6 + 3 + 8)
    assert counter.count_message(message, "gpt-4o") == 3 + 9 + calls


def test_legacy_function_call_counts_overhead_name_and_arguments() -> None:
    counter, _ = char_counter()
    message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "f", "arguments": "{}"},
    }
    assert counter.count_message(message, "gpt-4o") == 3 + 9 + 3 + 1 + 2


@pytest.mark.parametrize(
    ("arguments", "prompt_tokens"),
    [('{"foo": "bar", "baz": 1.5}', 26), ('{"foo":"bar", "baz":\n\n 1.5}', 25)],
)
def test_measured_function_call_counts(
    exact: TokenCounter, arguments: str, prompt_tokens: int
) -> None:
    # prompt_tokens gpt-3.5-turbo reported (recorded by openai-chat-tokens); the plain
    # cookbook formula says 3 less.
    call = {"name": "do_stuff", "arguments": arguments}
    message = {"role": "assistant", "content": "", "function_call": call}
    assert exact.count_messages([message], "gpt-3.5-turbo") == prompt_tokens


def test_a_short_id_call_costs_the_overhead_the_upstream_measured(exact: TokenCounter) -> None:
    # 300 calls with short numeric ids: the upstream counted 8,221 where the formula said
    # 7,201, 3.4 more per call. Each call now costs 3 + its id (1 token) more: never less.
    enc = exact.encoder("gpt-4o")

    def n(text: str) -> int:
        return len(enc.encode_ordinary(text))

    call = {"id": "17", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    plain = 3 + n("assistant") + n("read") + n("{}")
    assert exact.count_message(message, "gpt-4o") == plain + 3 + n("17")
    assert exact.count_message(message, "gpt-4o") - plain >= 3.4


def test_content_parts() -> None:
    counter, _ = char_counter()

    def user(*parts: dict[str, Any]) -> dict[str, Any]:
        return {"role": "user", "content": list(parts)}

    def image(url: str, detail: str | None = None) -> dict[str, Any]:
        return {
            "type": "image_url",
            "image_url": {"url": url} | ({"detail": detail} if detail else {}),
        }

    text = {"type": "text", "text": "look"}
    assert counter.count_message(user(text, text), "gpt-4o") == 3 + 4 + 8 + 1  # a separator
    low = image("https://example.com/x.png", "low")
    assert counter.count_message(user(text, low), "gpt-4o") == 3 + 4 + 4 + LOW_DETAIL
    high = image(png_url(1024, 1024), "high")
    assert counter.count_message(user(high), "gpt-4o") == 3 + 4 + 765
    assert counter.count_message(user(image(png_url(512, 512))), "gpt-4o") == 3 + 4 + 255
    remote = image("https://example.com/x.png", "auto")
    assert counter.count_message(user(remote), "gpt-4o") == 3 + 4 + MAX_IMAGE_TOKENS
    refusal = {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}
    assert counter.count_message(refusal, "gpt-4o") == 3 + 9 + 2
    odd = {"type": "file", "file": {"file_id": "f1"}}
    assert counter.count_message(user(odd, "junk", 7), "gpt-4o") == 3 + 4 + len(orjson.dumps(odd))


def test_image_parts_follow_the_models_formula_and_never_share_a_cache_entry() -> None:
    counter, _ = char_counter()
    part = {"type": "image_url", "image_url": {"url": png_url(1024, 1024), "detail": "low"}}
    message = {"role": "user", "content": [part]}
    assert counter.count_message(message, "gpt-4.1") == 3 + 4 + LOW_DETAIL
    assert counter.count_message(message, "gpt-4.1-mini") == 3 + 4 + 1024  # 32 x 32 patches
    assert counter.count_message(message, "gpt-4.1") == 3 + 4 + LOW_DETAIL
    assert counter.direct(message, "gpt-4.1-mini") == 3 + 4 + 1024


def test_count_messages_adds_reply_priming_and_count_each_splits_it() -> None:
    counter, _ = char_counter()
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "bc"}]
    assert counter.count_each(messages, "gpt-4o") == [3 + 4 + 1, 3 + 9 + 2]
    assert counter.count_messages(messages, "gpt-4o") == 8 + 14 + REPLY_PRIMING
    assert counter.count_messages([], "gpt-4o") == REPLY_PRIMING
    assert counter.count_text("", "gpt-4o") == 0
    assert counter.count_text("abc", "gpt-4o") == 3


# -- encodings --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4.1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-oss-20b", "o200k_harmony"),
        ("meta-llama/Llama-3.1-8B-Instruct", "cl100k_base"),
        ("my-local-model", "o200k_base"),
        ("", "o200k_base"),
        ("acme-7b", "cl100k_base"),
    ],
)
def test_encoding_names(model: str, encoding: str) -> None:
    table = ModelTable.with_overrides([("acme-*", ModelInfo(4_096, encoding="cl100k_base"))])
    counter, _ = char_counter(models=table)
    assert counter.encoding_name(model) == encoding


def test_each_encoding_is_loaded_once() -> None:
    counter, made = char_counter()
    for model in ("gpt-4o", "gpt-4o-mini", "o3", "gpt-4", "gpt-3.5-turbo"):
        counter.count_text("hi", model)
    assert sorted(made) == ["cl100k_base", "o200k_base"]
    assert counter.encoder("gpt-4o") is made["o200k_base"]


# -- the cache --------------------------------------------------------------------------
HISTORY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Find the bug."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "src/a.py:1: bug"},
    {"role": "assistant", "content": "Found it."},
]


def test_a_repeated_history_is_not_tokenized_again() -> None:
    counter, made = char_counter()
    first = counter.count_messages(HISTORY, "gpt-4o")
    enc = made["o200k_base"]
    enc.encoded.clear()
    # The proxy parses every body afresh: no object identity survives; key order may differ.
    again = orjson.loads(orjson.dumps(HISTORY))
    again[0] = dict(reversed(list(again[0].items())))
    assert counter.count_messages(again, "gpt-4o") == first
    assert enc.encoded == []
    grown = [*again, {"role": "user", "content": "Fix it."}]
    assert counter.count_messages(grown, "gpt-4o") == first + 3 + 4 + 7
    assert enc.encoded == ["user", "Fix it."]


def test_a_changed_message_is_counted_again() -> None:
    counter, made = char_counter()
    counter.count_messages(HISTORY, "gpt-4o")
    made["o200k_base"].encoded.clear()
    changed = [*HISTORY[:-1], {"role": "assistant", "content": "Found it!"}]
    assert counter.count_messages(changed, "gpt-4o") == counter.count_messages(HISTORY, "gpt-4o")
    assert made["o200k_base"].encoded == ["assistant", "Found it!"]


def test_measure_takes_the_keys_an_earlier_measure_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller holding the keys (the audit's spend, after curation) is not made to hash
    the messages again; a missing one is computed; a list of the wrong length is ignored."""
    counter, _ = char_counter()
    keys, counts = counter.measure(HISTORY, "gpt-4o")
    hashed: list[object] = []
    real = tokens_module.message_key
    monkeypatch.setattr(tokens_module, "message_key", lambda p, m: hashed.append(m) or real(p, m))
    assert counter.measure(HISTORY, "gpt-4o", known=keys) == (keys, counts)
    assert hashed == []
    assert counter.measure(HISTORY, "gpt-4o", known=[None, *keys[1:]]) == (keys, counts)
    assert hashed == [HISTORY[0]]
    assert counter.measure(HISTORY, "gpt-4o", known=keys[1:]) == (keys, counts)
    assert len(hashed) == 1 + len(HISTORY)


def test_duplicates_in_one_request_are_tokenized_once() -> None:
    counter, made = char_counter()
    message = {"role": "user", "content": "same"}
    assert counter.count_each([message, dict(message), message], "gpt-4o") == [11, 11, 11]
    assert made["o200k_base"].encoded == ["user", "same"]


def test_each_encoding_has_its_own_entries() -> None:
    counter, made = char_counter()
    counter.count_message(HISTORY[1], "gpt-4o")
    counter.count_message(HISTORY[1], "gpt-4")
    assert made["cl100k_base"].encoded == ["user", "Find the bug."]


def test_long_texts_cuts_and_tool_lists_are_cached_too() -> None:
    counter, made = char_counter()
    text = "lorem ipsum " * 100
    tools = [{"type": "function", "function": {"name": "grep", "description": "Search."}}]
    first = (
        counter.count_text(text, "gpt-4o"),
        counter.head(text, "gpt-4o", 50),
        counter.tail(text, "gpt-4o", 50),
        counter.count_tools(tools, "gpt-4o"),
    )
    enc = made["o200k_base"]
    enc.encoded.clear()
    again = (
        counter.count_text(text.encode().decode(), "gpt-4o"),
        counter.head(text.encode().decode(), "gpt-4o", 50),
        counter.tail(text.encode().decode(), "gpt-4o", 50),
        counter.count_tools(orjson.loads(orjson.dumps(tools)), "gpt-4o"),
    )
    assert again == first
    assert enc.encoded == []
    assert counter.head(text, "gpt-4o", 51) == text[:51]  # another limit, another entry


def test_the_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    counter, made = char_counter(cache_entries=8)
    messages = [{"role": "user", "content": f"message {i}"} for i in range(20)]
    counter.count_messages(messages[:8], "gpt-4o")
    counter.count_message(messages[0], "gpt-4o")  # used again: now the most recent
    counter.count_message(messages[8], "gpt-4o")  # evicts messages[1], the least recent
    enc = made["o200k_base"]
    enc.encoded.clear()
    counter.count_message(messages[0], "gpt-4o")
    assert enc.encoded == []
    counter.count_message(messages[1], "gpt-4o")
    assert enc.encoded == ["user", "message 1"]
    counter.count_messages(messages, "gpt-4o")
    assert counter.cache_size == 8


def test_a_zero_sized_cache_still_counts() -> None:
    counter, _ = char_counter(cache_entries=0)
    assert counter.count_messages(HISTORY, "gpt-4o") == counter.count_messages(HISTORY, "gpt-4o")
    assert counter.cache_size == 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="cache_entries"):
        TokenCounter(cache_entries=-1)
    with pytest.raises(ValueError, match="load_timeout_s"):
        TokenCounter(load_timeout_s=0)


def test_concurrent_counting_agrees_with_serial_counting() -> None:
    counter, _ = char_counter(cache_entries=16)
    messages = [{"role": "user", "content": "x" * i} for i in range(40)]
    expected = [3 + 4 + i for i in range(40)]
    errors: list[str] = []
    start = threading.Barrier(4)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        for _ in range(50):
            order = rng.sample(range(40), 40)
            got = counter.count_each([messages[i] for i in order], "gpt-4o")
            if got != [expected[i] for i in order]:
                errors.append(f"thread {seed}: {got}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert counter.cache_size <= 16


# -- no exact encoding ------------------------------------------------------------------
def test_fallback_warns_once_calls_the_hook_once_and_keeps_counting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="curator.tokens")
    calls: list[str] = []
    counter = TokenCounter(loader=failing_loader, on_fallback=calls.append)
    counts = [counter.count_messages(COOKBOOK_MESSAGES, m) for m in ("gpt-4o", "gpt-4o-mini")]
    counter.count_text("more text " * 100, "o3")
    counter.head("more text " * 100, "gpt-4o", 10)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "o200k_base" in warnings[0].getMessage()
    assert "TIKTOKEN_CACHE_DIR" in warnings[0].getMessage()
    assert calls == ["o200k_base"]
    assert counter.fallbacks == {"o200k_base"}
    assert isinstance(counter.encoder("gpt-4o"), EstimatingEncoder)
    # The exact count is 124: the estimate errs high, but not absurdly.
    assert counts[0] == counts[1]
    assert 124 <= counts[0] <= 2 * 124
    counter.count_text("x", "gpt-4")
    assert calls == ["o200k_base", "cl100k_base"]


def test_a_broken_fallback_hook_does_not_fail_counting(caplog: pytest.LogCaptureFixture) -> None:
    def hook(_name: str) -> None:
        raise RuntimeError("metrics are down")

    counter = TokenCounter(loader=failing_loader, on_fallback=hook)
    assert counter.count_text("hello", "gpt-4o") > 0
    assert any("on_fallback" in r.getMessage() for r in caplog.records)


def test_a_hanging_load_times_out_and_a_late_success_replaces_the_estimate() -> None:
    release = threading.Event()
    late = CharEncoder("o200k_base")
    calls: list[str] = []

    def slow_loader(_name: str) -> Encoder:
        release.wait(60)
        return late

    counter = TokenCounter(loader=slow_loader, on_fallback=calls.append, load_timeout_s=0.05)
    message = {"role": "user", "content": "hello there"}
    estimated = counter.count_message(message, "gpt-4o")
    assert calls == ["o200k_base"]
    assert counter.fallbacks == {"o200k_base"}
    release.set()
    loading = [t for t in threading.enumerate() if t.name == "curator-load-o200k_base"]
    for thread in loading:
        thread.join(30)
    assert counter.fallbacks == set()
    assert counter.encoder("gpt-4o") is late
    # Estimated counts were cached apart, so the exact encoder now answers.
    assert counter.count_message(message, "gpt-4o") == 3 + 4 + 11 != estimated


def test_the_default_loader_never_hangs_without_the_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # p50k_base is not among the shared files, so tiktoken would try to download it.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    table = ModelTable.with_overrides([("legacy-*", ModelInfo(4_096, encoding="p50k_base"))])
    counter = TokenCounter(table, load_timeout_s=2)
    assert counter.count_messages(HISTORY, "legacy-model") > REPLY_PRIMING


# -- robustness -------------------------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ROBUST = char_counter()[0]
KEYS = st.sampled_from(
    ["role", "content", "name", "tool_calls", "function_call", "tool_call_id", "x"]
)


@settings(max_examples=150)
@given(
    messages=st.lists(st.dictionaries(KEYS | st.text(max_size=5), JSON, max_size=6), max_size=5),
    tools=st.lists(JSON, max_size=3),
)
def test_any_json_shape_is_counted_without_raising(
    messages: list[dict[str, Any]], tools: list[Any]
) -> None:
    counter = ROBUST
    assert counter.count_messages(messages, "gpt-4o") >= 3 * len(messages) + REPLY_PRIMING
    assert counter.count_tools(tools, "gpt-4o") >= 0


def test_a_tools_list_seen_again_is_not_serialized_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests share an equal tools list (the proxy's `SharedTools`): the budget keys its
    count once, though it reads the list through `tool_list` on every request."""
    counter, policy = f.counter(), Policy("p")
    tools = [{"type": "function", "function": {"name": "grep", "description": "Search."}}]
    made: list[object] = []
    real = tokens_module.json_bytes
    monkeypatch.setattr(tokens_module, "json_bytes", lambda v: made.append(v) or real(v))
    budgets = [policy.budget({"model": "gpt-4o", "tools": tools}, counter) for _ in range(3)]
    assert len({b.tools for b in budgets}) == 1
    assert len(made) == 1
    again = policy.budget({"model": "gpt-4o", "tools": orjson.loads(orjson.dumps(tools))}, counter)
    assert again.tools == budgets[0].tools
    assert len(made) == 2  # an equal list that is another object is keyed by its bytes


def test_tool_list_is_the_bodys_own_list_unless_it_filters() -> None:
    tools = [{"type": "function", "function": {"name": "grep"}}]
    assert tool_list({"tools": tools}) is tools
    mixed = [*tools, "not a tool"]
    assert tool_list({"tools": mixed}) == tools
    functions = [{"name": "grep"}]
    assert tool_list({"functions": functions}) == [{"type": "function", "function": functions[0]}]
