"""Context windows and encodings per model name, with user overrides (globs)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

DEFAULT_CONTEXT_WINDOW = 128_000


@dataclass(frozen=True, slots=True)
class ModelInfo:
    context_window: int
    max_input_tokens: int | None = None
    """Some models accept fewer input tokens than their window (gpt-5: 272k of 400k)."""
    encoding: str | None = None
    """A tiktoken encoding name; None lets tiktoken's own model map decide."""


# First match wins, so more specific globs come first.
BUILTIN: tuple[tuple[str, ModelInfo], ...] = (
    ("gpt-4o-mini*", ModelInfo(128_000)),
    ("gpt-4o*", ModelInfo(128_000)),
    ("chatgpt-4o*", ModelInfo(128_000)),
    ("gpt-4.1*", ModelInfo(1_047_576)),
    ("gpt-5*", ModelInfo(400_000, max_input_tokens=272_000)),
    ("o1-mini*", ModelInfo(128_000)),
    ("o1-preview*", ModelInfo(128_000)),
    ("o1*", ModelInfo(200_000)),
    ("o3-mini*", ModelInfo(200_000)),
    ("o3*", ModelInfo(200_000)),
    ("o4-mini*", ModelInfo(200_000)),
    ("gpt-4-turbo*", ModelInfo(128_000)),
    ("gpt-4-*preview*", ModelInfo(128_000)),
    ("gpt-4-32k*", ModelInfo(32_768)),
    ("gpt-4", ModelInfo(8_192)),
    ("gpt-4-0613", ModelInfo(8_192)),
    ("gpt-4-0314", ModelInfo(8_192)),
    ("gpt-3.5-turbo-instruct*", ModelInfo(4_096)),
    ("gpt-3.5-turbo*", ModelInfo(16_385)),
    # Common open models, as served by vLLM, Ollama, OpenRouter and friends. Their own
    # tokenizers differ from OpenAI's; cl100k_base is a close, slightly generous estimate.
    ("*llama-3.1*", ModelInfo(131_072, encoding="cl100k_base")),
    ("*llama-3.2*", ModelInfo(131_072, encoding="cl100k_base")),
    ("*llama-3.3*", ModelInfo(131_072, encoding="cl100k_base")),
    ("*llama3.1*", ModelInfo(131_072, encoding="cl100k_base")),
    ("*llama-3*", ModelInfo(8_192, encoding="cl100k_base")),
    ("*llama3*", ModelInfo(8_192, encoding="cl100k_base")),
    ("*qwen2.5*", ModelInfo(32_768, encoding="cl100k_base")),
    ("*qwen3*", ModelInfo(40_960, encoding="cl100k_base")),
    ("*mistral-large*", ModelInfo(131_072, encoding="cl100k_base")),
    ("*mixtral*", ModelInfo(32_768, encoding="cl100k_base")),
    ("*mistral*", ModelInfo(32_768, encoding="cl100k_base")),
    ("*deepseek*", ModelInfo(65_536, encoding="cl100k_base")),
    ("*gemma-2*", ModelInfo(8_192, encoding="cl100k_base")),
    ("*gemma-3*", ModelInfo(131_072, encoding="cl100k_base")),
    ("*phi-3*", ModelInfo(128_000, encoding="cl100k_base")),
    ("*claude*", ModelInfo(200_000, encoding="cl100k_base")),
    ("*gemini*", ModelInfo(1_048_576, encoding="cl100k_base")),
)


@dataclass(frozen=True, slots=True)
class ModelTable:
    """Looks a model name up: user overrides first, then the built-in table."""

    overrides: tuple[tuple[str, ModelInfo], ...] = ()

    @classmethod
    def with_overrides(cls, overrides: Iterable[tuple[str, ModelInfo]]) -> ModelTable:
        return cls(tuple(overrides))

    def find(self, model: str) -> ModelInfo | None:
        name = model.lower()
        # "openai/gpt-4o" (OpenRouter) and "gpt-4o" should resolve alike.
        bare = name.rsplit("/", 1)[-1]
        for pattern, info in self.overrides:
            if fnmatchcase(model, pattern) or fnmatchcase(name, pattern.lower()):
                return info
        for pattern, info in BUILTIN:
            if fnmatchcase(bare, pattern):
                return info
        return None

    def lookup(self, model: str) -> ModelInfo:
        return self.find(model) or ModelInfo(DEFAULT_CONTEXT_WINDOW)
