"""policies/fast_bpe.py: rs_bpe must give tiktoken's token ids, or not be used at all."""

from __future__ import annotations

import logging

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from policies import fast_bpe
from policies.encoders import Encoder, counter_of, load_tiktoken
from policies.fast_bpe import (
    PROBE,
    PROBE_DIGESTS,
    TOKENIZER_ENV,
    FastBpeEncoder,
    ids_digest,
    load_exact,
    load_fast,
    tokenizer_choice,
)
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
