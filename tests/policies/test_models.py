from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from policies.models import (
    BUILTIN,
    DEFAULT_CONTEXT_WINDOW,
    ModelInfo,
    ModelTable,
    bare_name,
)

TABLE = ModelTable()


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("chatgpt-4o-latest", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini-2025-04-14", 1_047_576),
        ("gpt-4.1-nano", 1_047_576),
        ("o1", 200_000),
        ("o1-2024-12-17", 200_000),
        ("o1-mini", 128_000),
        ("o1-preview-2024-09-12", 128_000),
        ("o3", 200_000),
        ("o3-mini-2025-01-31", 200_000),
        ("o4-mini", 200_000),
        ("o4-mini-2025-04-16", 200_000),
        ("gpt-5", 400_000),
        ("gpt-5-mini-2025-08-07", 400_000),
        ("gpt-5-nano", 400_000),
        ("gpt-5-chat-latest", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-4-0314", 8_192),
        ("gpt-4-32k-0613", 32_768),
        ("gpt-4-turbo", 128_000),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4-0125-preview", 128_000),
        ("gpt-4-1106-vision-preview", 128_000),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-3.5-turbo-0125", 16_385),
        ("gpt-3.5-turbo-16k-0613", 16_385),
        ("gpt-3.5-turbo-0613", 4_096),
        ("gpt-3.5-turbo-instruct", 4_096),
        ("gpt-35-turbo", 16_385),
    ],
)
def test_openai_windows(model: str, window: int) -> None:
    assert TABLE.lookup(model).context_window == window


def test_gpt5_limits_input_below_its_window() -> None:
    info = TABLE.lookup("gpt-5")
    assert (info.context_window, info.max_input_tokens) == (400_000, 272_000)
    assert TABLE.lookup("gpt-4o").max_input_tokens is None


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1", "gpt-4-turbo", "gpt-4-32k", "gpt-4.5"])
def test_gpt4_glob_does_not_swallow_its_successors(model: str) -> None:
    assert TABLE.lookup(model).context_window != 8_192


@pytest.mark.parametrize(
    ("model", "same_as"),
    [
        ("openai/gpt-4o", "gpt-4o"),
        ("azure/gpt-4o-2024-08-06", "gpt-4o"),
        ("openrouter/openai/gpt-4.1", "gpt-4.1"),
        ("GPT-4o", "gpt-4o"),
        ("  gpt-4  ", "gpt-4"),
        ("ft:gpt-4o-mini-2024-07-18:acme::9abc", "gpt-4o-mini"),
        ("ft:gpt-3.5-turbo-0125:acme:triage:1", "gpt-3.5-turbo"),
    ],
)
def test_prefixes_case_and_fine_tunes_resolve_like_the_bare_name(model: str, same_as: str) -> None:
    assert TABLE.lookup(model) == TABLE.lookup(same_as)
    assert TABLE.find(model) is not None


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("meta-llama/Llama-3.1-70B-Instruct", 131_072),
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8_192),
        ("llama3.2:3b", 131_072),
        ("llama3:8b", 8_192),
        ("llama2:13b", 4_096),
        ("Qwen/Qwen2.5-Coder-32B-Instruct", 32_768),
        ("qwen3:8b", 40_960),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507", 262_144),
        ("mistral-large-latest", 131_072),
        ("mistralai/Mistral-7B-Instruct-v0.3", 32_768),
        ("mixtral:8x7b", 32_768),
        ("deepseek-chat", 65_536),
        ("google/gemma-3-27b-it", 131_072),
        ("microsoft/Phi-3-mini-4k-instruct", 4_096),
        ("microsoft/Phi-3-mini-128k-instruct", 131_072),
        ("anthropic/claude-3.5-sonnet", 200_000),
        ("google/gemini-2.5-pro", 1_048_576),
    ],
)
def test_open_models_get_their_window_and_a_stand_in_encoding(model: str, window: int) -> None:
    info = TABLE.lookup(model)
    assert info.context_window == window
    assert info.encoding == "cl100k_base"


def test_openai_models_leave_the_encoding_to_tiktoken() -> None:
    assert all(TABLE.lookup(m).encoding is None for m in ("gpt-4o", "gpt-4", "o3", "gpt-oss-120b"))


def test_unknown_models_get_the_default_window() -> None:
    assert TABLE.find("my-private-finetune") is None
    assert TABLE.lookup("my-private-finetune") == ModelInfo(DEFAULT_CONTEXT_WINDOW)
    assert TABLE.lookup("").context_window == DEFAULT_CONTEXT_WINDOW


def test_overrides_win_over_the_builtin_table_in_file_order() -> None:
    table = ModelTable.with_overrides(
        [
            ("gpt-4o-mini*", ModelInfo(64_000)),
            ("gpt-4o*", ModelInfo(100_000, encoding="cl100k_base")),
            ("my-*", ModelInfo(32_000, encoding="o200k_base")),
        ]
    )
    assert table.lookup("gpt-4o-mini").context_window == 64_000
    assert table.lookup("gpt-4o-2024-08-06") == ModelInfo(100_000, encoding="cl100k_base")
    assert table.lookup("my-model").encoding == "o200k_base"
    assert table.lookup("gpt-4.1").context_window == 1_047_576


def test_override_globs_match_with_or_without_the_provider_prefix() -> None:
    table = ModelTable.with_overrides(
        [
            ("llama-3.1-70b*", ModelInfo(65_536)),
            ("acme/*", ModelInfo(12_000)),
        ]
    )
    assert table.lookup("meta-llama/Llama-3.1-70B-Instruct").context_window == 65_536
    assert table.lookup("llama-3.1-70b-instruct").context_window == 65_536
    assert table.lookup("meta-llama/Llama-3.1-8B-Instruct").context_window == 131_072
    assert table.lookup("ACME/anything").context_window == 12_000
    assert table.lookup("anything").context_window == DEFAULT_CONTEXT_WINDOW


def test_bare_name() -> None:
    assert bare_name(" OpenAI/GPT-4o ") == "gpt-4o"
    assert bare_name("ft:gpt-4o:org:name:id") == "gpt-4o"
    assert bare_name("llama3.1:8b") == "llama3.1:8b"


def test_builtin_globs_are_lower_case_and_each_one_is_reachable() -> None:
    # A glob shadowed by an earlier, broader one would be dead configuration.
    for i, (pattern, info) in enumerate(BUILTIN):
        assert pattern == pattern.lower()
        probe = pattern.replace("*", "x").replace("[123]", "1")
        first = next(p for p, _ in BUILTIN if fnmatchcase(probe, p))
        assert first == pattern, f"{pattern} (#{i}) is shadowed by {first}"
        assert TABLE.lookup(probe) == info


def test_a_name_is_matched_once_and_answers_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    table = ModelTable.with_overrides([("llama-3*", ModelInfo(8192, encoding="cl100k_base"))])
    calls: list[str] = []
    import policies.models as models

    def counted(name: str, pattern: str) -> bool:
        calls.append(name)
        return fnmatchcase(name, pattern)

    monkeypatch.setattr(models, "fnmatchcase", counted)
    first = (table.find("openai/llama-3.1-70b"), table.pattern("openai/llama-3.1-70b"))
    matched = len(calls)
    again = (table.find("openai/llama-3.1-70b"), table.pattern("openai/llama-3.1-70b"))
    assert again == first == (ModelInfo(8192, encoding="cl100k_base"), "llama-3*")
    assert len(calls) == matched  # from the memo
    assert table.override("gpt-4o") is None
    assert table.find("gpt-4o") == TABLE.find("gpt-4o")


def test_the_memo_starts_over_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import policies.models as models

    monkeypatch.setattr(models, "MEMO_MAX", 3)
    table = ModelTable()
    for i in range(10):
        table.find(f"client-chosen-{i}")
    assert len(table._memo) <= 3
    assert table == ModelTable()  # the memo is no part of the table's value
