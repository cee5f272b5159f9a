"""policies/fast_bpe.py: rs_bpe must give tiktoken's token ids, or not be used at all."""

from __future__ import annotations

import importlib
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from policies import fast_bpe
from policies.encoders import Encoder, counter_of, load_tiktoken
from policies.fast_bpe import (
    HOLD_CHARS,
    LONGEST_CHARS,
    PROBE,
    PROBE_DIGESTS,
    TOKENIZER_ENV,
    FastBpeEncoder,
    ids_digest,
    load_exact,
    load_fast,
    tokenizer_choice,
)
from policies.split_rules import SPLITS
from policies.splits import Profile, splits
from policies.tokens import TokenCounter
from tests.factories import assistant_calls, call, tool_result, user

pytest.importorskip("rs_bpe", reason="the [fast] extra is not installed")

NAMES = sorted(PROBE_DIGESTS)
# Pieces the pre-tokenizers treat specially, so random texts hit their edges often.
TRICKY = st.sampled_from(
    [" ", "  ", "\n", "\r\n", "\t", "\u00a0", "'s", "'LL", "\u2019", "ß", "É", "日本", "😀",
     "👍🏽", "123", "4567", "١٢", ".", "...", "—", "/", "}\n/", "\u0301", "\u200b",
     "<|endoftext|>", "CamelCase", "HTTPServer", "a1b2", "\x00", "\ud800"]
)  # fmt: skip
TEXTS = st.lists(st.one_of(TRICKY, st.text(max_size=12)), max_size=40).map("".join)


@pytest.fixture(scope="module")
def pairs() -> dict[str, tuple[Encoder, FastBpeEncoder]]:
    found = {}
    for name in NAMES:
        try:
            reference = load_tiktoken(name)
        except Exception:
            pytest.skip("tiktoken's BPE files are unavailable: set TIKTOKEN_CACHE_DIR")
        fast = load_fast(name)
        assert fast is not None
        found[name] = (reference, fast)
    return found


def test_the_probe_digests_are_tiktokens_own(pairs: dict[str, tuple[Encoder, Encoder]]) -> None:
    for name, (reference, _) in pairs.items():
        assert ids_digest(reference.encode_ordinary(PROBE)) == PROBE_DIGESTS[name]


@settings(max_examples=400)
@given(text=TEXTS)
@example(text="a\ud800b")  # a lone surrogate: tiktoken encodes U+FFFD in its place
@example(text="x" * 5000 + " \n\n  end")
def test_token_ids_and_counts_are_tiktokens(
    pairs: dict[str, tuple[Encoder, FastBpeEncoder]], text: str
) -> None:
    for reference, fast in pairs.values():
        ids = reference.encode_ordinary(text)
        assert fast.encode_ordinary(text) == ids
        assert fast.count(text) == len(ids) == counter_of(fast)(text)
        assert fast.decode_bytes(ids[:3]) == reference.decode_bytes(ids[:3])
        assert fast.decode_bytes(ids[-3:]) == reference.decode_bytes(ids[-3:])


def test_counters_agree_on_counts_and_cuts_of_a_conversation() -> None:
    output = "\n".join(f"{i:4d}  def handler_{i}(request):  # naïve → ok" for i in range(600))
    messages = [
        user("Fix the failing test, then explain."),
        assistant_calls(call("call_1", "read_file", {"path": "src/app.py"})),
        tool_result("call_1", output),
    ]
    fast, slow = TokenCounter(loader=load_exact), TokenCounter(loader=load_tiktoken)
    for model in ("gpt-4o", "gpt-4"):
        assert isinstance(fast.encoder(model), FastBpeEncoder)
        assert not isinstance(slow.encoder(model), FastBpeEncoder)
        assert fast.count_each(messages, model) == slow.count_each(messages, model)
        for cut in ("head", "tail"):
            assert getattr(fast, cut)(output, model, 700) == getattr(slow, cut)(output, model, 700)


def test_a_profile_counts_as_tiktoken_does(pairs: dict[str, tuple[Encoder, Encoder]]) -> None:
    text = "\n".join(f"line {i}: {'é' * (i % 7)} value={i * 37}" for i in range(900))
    for reference, fast in pairs.values():
        rule = splits(fast)
        assert rule is not None
        profile = Profile(fast, text, rule)
        assert profile.total == len(reference.encode_ordinary(text))


def test_tiktoken_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKENIZER_ENV, " TikToken ")
    assert tokenizer_choice() == "tiktoken"
    assert load_fast("o200k_base") is None
    assert not isinstance(load_exact("o200k_base"), FastBpeEncoder)


def test_a_misspelt_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKENIZER_ENV, "tiktokn")
    with pytest.raises(ValueError, match="CURATOR_TOKENIZER='tiktokn': must be one of auto"):
        tokenizer_choice()
    monkeypatch.setenv(TOKENIZER_ENV, "")
    assert tokenizer_choice() == "auto"


def test_encodings_rs_bpe_lacks_come_from_tiktoken() -> None:
    assert load_fast("p50k_base") is None
    assert load_fast("o200k_harmony") is None


def test_without_rs_bpe_tiktoken_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise ImportError(name)

    monkeypatch.setattr(fast_bpe.importlib, "import_module", missing)
    assert load_fast("o200k_base") is None


def test_a_disagreeing_build_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(fast_bpe.PROBE_DIGESTS, "o200k_base", "0" * 32)
    with caplog.at_level(logging.WARNING, logger="curator.tokens"):
        assert load_fast("o200k_base") is None
    assert "disagrees with tiktoken" in caplog.text


class Recording:
    """rs_bpe's tokenizer, noting the length of every text it is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sizes: list[int] = []

    def bpe(self) -> Any:
        return self.inner.bpe()

    def count(self, text: str) -> int:
        self.sizes.append(len(text))
        return int(self.inner.count(text))

    def encode(self, text: str) -> list[int]:
        self.sizes.append(len(text))
        return list(self.inner.encode(text))


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, Recording]:
    """What `load_fast` loads, recorded: rs_bpe's tokenizer per encoding name."""
    real = importlib.import_module("rs_bpe.bpe")
    made: dict[str, Recording] = {}

    def make(name: str) -> Recording:
        made[name] = Recording(getattr(real.openai, name)())
        return made[name]

    openai = SimpleNamespace(**{name: lambda name=name: make(name) for name in NAMES})
    module = SimpleNamespace(openai=openai)
    monkeypatch.setattr(fast_bpe.importlib, "import_module", lambda _: module)
    return made


@pytest.mark.parametrize("name", NAMES)
def test_a_long_text_reaches_rs_bpe_in_pieces(
    pairs: dict[str, tuple[Encoder, FastBpeEncoder]], recorded: dict[str, Recording], name: str
) -> None:
    # rs_bpe keeps the GIL while it works: one call on a long text stops the event loop.
    text = "\n".join(f"line {i}: {'é' * (i % 7)} value={i * 37}" for i in range(3000))
    assert len(text) > 4 * HOLD_CHARS
    reference = pairs[name][0].encode_ordinary(text)
    fast = load_fast(name)
    assert fast is not None
    calls = recorded[name]
    calls.sizes.clear()
    assert fast.count(text) == len(reference)
    assert fast.encode_ordinary(text) == reference
    longest_line = max(map(len, text.splitlines())) + 1
    assert len(calls.sizes) >= 2 * (len(text) // HOLD_CHARS)
    assert max(calls.sizes) <= HOLD_CHARS + longest_line
    assert sum(calls.sizes) == 2 * len(text)


@pytest.mark.parametrize(
    "text",
    [
        "x=1; " * LONGEST_CHARS,  # blanks: cut before one
        "ab" * (5 * LONGEST_CHARS // 2),  # no blank either: cut at LONGEST_CHARS
        "word " * LONGEST_CHARS,
    ],
)
def test_a_long_line_is_cut_anyway_and_counted_high(
    pairs: dict[str, tuple[Encoder, FastBpeEncoder]], recorded: dict[str, Recording], text: str
) -> None:
    # No split point: one call on a 25 MB line held the GIL for 2-3 s (issue U item 4).
    fast = load_fast("o200k_base")
    assert fast is not None
    sizes = recorded["o200k_base"].sizes
    sizes.clear()
    exact = len(pairs["o200k_base"][0].encode_ordinary(text))
    counted = fast.count(text)
    assert len(sizes) >= 2
    assert max(sizes) <= LONGEST_CHARS
    cuts = len(sizes) - 1
    assert exact <= counted <= exact + 2 * cuts
    assert fast.decode_bytes(fast.encode_ordinary(text)) == text.encode()


@settings(max_examples=300)
@given(text=TEXTS)
@example(text="a\nb\n\nc\n d\n/e\r\nf")
def test_pieces_give_tiktokens_ids_and_counts(
    pairs: dict[str, tuple[Encoder, FastBpeEncoder]], text: str
) -> None:
    for name, (reference, fast) in pairs.items():
        tiny = FastBpeEncoder(name, fast.tokenizer, SPLITS[name], hold_chars=3, longest_chars=10**6)
        ids = reference.encode_ordinary(text)
        assert tiny.encode_ordinary(text) == ids
        assert tiny.count(text) == len(ids)


@settings(max_examples=300)
@given(text=TEXTS)
@example(text="aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
@example(text="the quick brown fox jumps over the lazy dog " * 4)
def test_forced_cuts_never_count_low_and_decode_exactly(
    pairs: dict[str, tuple[Encoder, FastBpeEncoder]], text: str
) -> None:
    for name, (reference, fast) in pairs.items():
        forced = FastBpeEncoder(name, fast.tokenizer, SPLITS[name], hold_chars=3, longest_chars=7)
        exact = len(reference.encode_ordinary(text))
        assert forced.count(text) >= exact
        assert forced.decode_bytes(forced.encode_ordinary(text)) == fast.decode_bytes(
            reference.encode_ordinary(text)
        )
