"""Context windows and encodings per model name, with user overrides (globs).

Names are matched case-insensitively after removing what providers put around a model:
a routing prefix (`openai/gpt-4o`, `azure/gpt-4o`) and a fine-tune wrapper
(`ft:gpt-4o-mini:org::id`). Globs are anchored (fnmatch), so `gpt-4` matches only
`gpt-4` and never `gpt-4o` or `gpt-4.1`; dated snapshots are matched by explicit globs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

DEFAULT_CONTEXT_WINDOW = 128_000


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the curator needs to know about a model: its window and its tokenizer."""

    context_window: int
    max_input_tokens: int | None = None
    """Some models accept fewer input tokens than their window (gpt-5: 272k of 400k)."""
    encoding: str | None = None
    """A tiktoken encoding name; None lets tiktoken's own model map decide."""


def _open(window: int) -> ModelInfo:
    # Open models use their own tokenizers; cl100k_base is a stand-in of similar density.
    # Operators who need exact numbers for one of them set a `models:` override.
    return ModelInfo(window, encoding="cl100k_base")


# Matched against the bare lower-case name; first match wins, so specific globs come first.
BUILTIN: tuple[tuple[str, ModelInfo], ...] = (
    # OpenAI. Dated snapshots ("gpt-4o-2024-08-06", "o3-mini-2025-01-31") ride on the `*`.
    ("gpt-5*chat*", ModelInfo(128_000)),
    ("gpt-5*", ModelInfo(400_000, max_input_tokens=272_000)),
    ("gpt-4.1*", ModelInfo(1_047_576)),
    ("gpt-4.5*", ModelInfo(128_000)),
    ("gpt-4o*", ModelInfo(128_000)),
    ("chatgpt-4o*", ModelInfo(128_000)),
    ("gpt-4-turbo*", ModelInfo(128_000)),
    ("gpt-4-*preview*", ModelInfo(128_000)),
    ("gpt-4-32k*", ModelInfo(32_768)),
    ("gpt-4", ModelInfo(8_192)),
    ("gpt-4-0613", ModelInfo(8_192)),
    ("gpt-4-0314", ModelInfo(8_192)),
    ("gpt-3.5-turbo-instruct*", ModelInfo(4_096)),
    ("gpt-3.5-turbo-0301", ModelInfo(4_096)),
    ("gpt-3.5-turbo-0613", ModelInfo(4_096)),
    ("gpt-3.5-turbo*", ModelInfo(16_385)),
    ("gpt-35-turbo*", ModelInfo(16_385)),
    ("o1-mini*", ModelInfo(128_000)),
    ("o1-preview*", ModelInfo(128_000)),
    ("o1", ModelInfo(200_000)),
    ("o1-*", ModelInfo(200_000)),
    ("o3", ModelInfo(200_000)),
    ("o3-*", ModelInfo(200_000)),
    ("o4-mini", ModelInfo(200_000)),
    ("o4-mini-*", ModelInfo(200_000)),
    ("codex-mini*", ModelInfo(200_000)),
    ("gpt-oss*", ModelInfo(131_072)),
    # Open models as vLLM, Ollama, OpenRouter and friends name them.
    ("*llama-3.[123]*", _open(131_072)),
    ("*llama3.[123]*", _open(131_072)),
    ("*llama-3*", _open(8_192)),
    ("*llama3*", _open(8_192)),
    ("*llama-2*", _open(4_096)),
    ("*llama2*", _open(4_096)),
    ("*qwen3*2507*", _open(262_144)),
    ("*qwen3-coder*", _open(262_144)),
    ("*qwen3*", _open(40_960)),
    ("*qwen2.5*", _open(32_768)),
    ("*mistral-large*", _open(131_072)),
    ("*mixtral-8x22b*", _open(65_536)),
    ("*mixtral*", _open(32_768)),
    ("*mistral*", _open(32_768)),
    ("*deepseek*", _open(65_536)),
    ("*gemma-3*", _open(131_072)),
    ("*gemma3*", _open(131_072)),
    ("*gemma-2*", _open(8_192)),
    ("*gemma2*", _open(8_192)),
    ("*phi-3*4k*", _open(4_096)),
    ("*phi-3*", _open(131_072)),
    ("*phi-4*", _open(16_384)),
    ("*claude*", _open(200_000)),
    ("*gemini*", _open(1_048_576)),
)


def bare_name(model: str) -> str:
    """`model` lower-cased, without a provider prefix or a fine-tune wrapper."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name.startswith("ft:"):
        name = name[3:].split(":", 1)[0]
    return name


Match = tuple[str, ModelInfo]
"""A glob and the model info it gives."""
MEMO_MAX = 4096
"""Model names a table remembers its matches for: clients choose the names, so the memo
starts over past this many (a config names a handful)."""


@dataclass(frozen=True, slots=True)
class ModelTable:
    """Looks a model name up: user overrides first, then the built-in table.

    Each name's matches are remembered (`_memo`): a request looked its model up four times
    (the budget, the upstream facts' label, the spend's window, the calibration), each
    trying up to every glob of both tables with `fnmatchcase`, ~3% of a small request's
    time on the default preset (py-spy). Thread-safe as a dict is: the worst a race does
    is match a name twice.
    """

    overrides: tuple[Match, ...] = ()
    """(glob, info) pairs from the config's `models:` section, in file order."""
    _memo: dict[str, tuple[Match | None, Match | None]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """model -> (the first override matching it, the first built-in entry matching it)."""

    @classmethod
    def with_overrides(cls, overrides: Iterable[Match]) -> ModelTable:
        return cls(tuple(overrides))

    def _matches(self, model: str) -> tuple[Match | None, Match | None]:
        memo = self._memo
        found = memo.get(model)
        if found is None:
            if len(memo) >= MEMO_MAX:
                memo.clear()
            bare = bare_name(model)
            builtin = next(((p, i) for p, i in BUILTIN if fnmatchcase(bare, p)), None)
            found = memo[model] = (self._override(model, bare), builtin)
        return found

    def override(self, model: str) -> ModelInfo | None:
        """The first of the user's overrides whose glob matches `model`."""
        found = self._matches(model)[0]
        return found[1] if found is not None else None

    def _override(self, model: str, bare: str) -> Match | None:
        full = model.strip().lower()
        for pattern, info in self.overrides:
            # A user's glob may name the model with or without its provider prefix.
            glob = pattern.lower()
            if fnmatchcase(full, glob) or fnmatchcase(bare, glob):
                return pattern, info
        return None

    def pattern(self, model: str) -> str | None:
        """The glob `find` matches `model` with (an override's, else the table's): a name
        from the config or the code, never the client's, so fit for a metric label."""
        override, builtin = self._matches(model)
        found = override or builtin
        return found[0] if found is not None else None

    def find(self, model: str) -> ModelInfo | None:
        """The first override, then built-in entry, whose glob matches `model`."""
        override, builtin = self._matches(model)
        found = override or builtin
        return found[1] if found is not None else None

    def lookup(self, model: str, upstream_window: int | None = None) -> ModelInfo:
        """Like `find`, but the window the upstream reports (`upstream_window`) beats the
        built-in table (the user's overrides still win), and unknown models get the
        default 128k window."""
        if upstream_window is not None and self.override(model) is None:
            known = self.find(model) or ModelInfo(upstream_window)
            return ModelInfo(upstream_window, known.max_input_tokens, known.encoding)
        return self.find(model) or ModelInfo(DEFAULT_CONTEXT_WINDOW)
