"""head/tail cuts (`fit_chars` through the counter) and the offline estimator."""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Sequence

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.cuts import fit_chars
from policies.encoders import Encoder, EstimatingEncoder, load_tiktoken
from policies.tokens import TokenCounter
from tests.factories import CharEncoder, failing_loader


class Recording:
    """A real encoder that records every text it is asked to encode."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.name = inner.name
        self.encoded: list[str] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.encoded.append(text)
        return self.inner.encode_ordinary(text)

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return self.inner.decode_bytes(tokens)


# -- head and tail ----------------------------------------------------------------------
CODE = "".join(
    f"    def handler_{i}(self, request: Request) -> Response:  # route {i}\n"
    f"        return self.render(request, status={200 + i % 3}, items=[{i}, {i * 7}])\n"
    for i in range(400)
)
TEXTS = {
    "ascii": CODE[:4000],
    "cjk": "日本語のテキスト、测试数据。中文字符和汉字\uff0c한국어 텍스트도 있습니다。" * 60,
    "emoji": "😀🚀🔥 ok ✅ 👩\u200d💻 done 🇨🇭 " * 120,
    "mixed": "Zürich café ☕ naïve façade Ångström 日本 🚀 π≈3.14159 " * 60,
    "sparse": ("=" * 64 + "\n" + " " * 48 + "x\n") * 80,  # many characters per token
}


def estimating_counter() -> TokenCounter:
    return TokenCounter(loader=failing_loader)


ESTIMATING = estimating_counter()


def check_cut(counter: TokenCounter, model: str, text: str, n: int, *, slack: int = 12) -> None:
    head, tail = counter.head(text, model, n), counter.tail(text, model, n)
    assert text.startswith(head)
    assert text.endswith(tail)
    for cut, grow in (
        (head, lambda k: text[: len(head) + k]),
        (tail, lambda k: text[-len(tail) - k :]),
    ):
        used = counter.count_text(cut, model)
        assert used <= n
        if cut != text:
            assert used >= n - 3  # a cut lands on a character, so a few tokens may go unused
            # Nearly the longest: a few more characters no longer fit.
            assert counter.count_text(grow(slack), model) > n


@pytest.mark.parametrize("name", sorted(TEXTS))
@pytest.mark.parametrize("n", [1, 2, 3, 17, 256])
@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
def test_head_and_tail_are_exact(exact: TokenCounter, model: str, name: str, n: int) -> None:
    check_cut(exact, model, TEXTS[name], n)


@pytest.mark.parametrize("name", sorted(TEXTS))
@pytest.mark.parametrize("n", [1, 2, 3, 17, 256])
def test_head_and_tail_are_exact_with_the_estimator(name: str, n: int) -> None:
    # Its chunks (up to 16 bytes of spaces) align to where encoding began, not to the cut.
    check_cut(estimating_counter(), "gpt-4o", TEXTS[name], n, slack=33)


def test_a_character_that_needs_more_tokens_than_allowed_is_left_out(exact: TokenCounter) -> None:
    rare = "".join(map(chr, range(0x1D504, 0x1D50B)))  # fraktur: byte-level tokens in cl100k
    assert exact.count_text(rare[0], "gpt-4") > 1
    assert exact.head(rare, "gpt-4", 1) == ""
    assert exact.tail(rare, "gpt-4", 1) == ""


def test_cuts_keep_the_original_characters(exact: TokenCounter) -> None:
    text = "ab\ud800cd\x00ef " * 200  # a lone surrogate and a NUL, which tiktoken replaces
    head = exact.head(text, "gpt-4o", 10)
    assert text.startswith(head)
    assert "\ud800" in head
    assert exact.count_text(head, "gpt-4o") <= 10


class FramingEncoder(CharEncoder):
    """Charges one token per character plus one at each end of whatever it encodes.

    So the characters of the first k tokens of a text encode, alone, to more than k
    tokens: the shape of a BPE whose prefix tokenizes differently from the whole.
    """

    def encode_ordinary(self, text: str) -> list[int]:
        return [0, *super().encode_ordinary(text), 0] if text else []

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return super().decode_bytes([t for t in tokens if t])


def test_cuts_are_proven_by_encoding_them_again() -> None:
    counter = TokenCounter(loader=FramingEncoder)
    text = string.ascii_lowercase * 40
    head, tail = counter.head(text, "gpt-4o", 10), counter.tail(text, "gpt-4o", 10)
    # The first 10 tokens hold 9 characters, which alone cost 11 tokens: 8 fit.
    assert head == text[:8]
    assert tail == text[-8:]
    assert counter.count_text(head, "gpt-4o") == counter.count_text(tail, "gpt-4o") == 10


class ByteEncoder:
    """One token per UTF-8 byte, so every multi-byte character straddles token edges."""

    name = "bytes"

    def __init__(self) -> None:
        self.calls = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.calls += 1
        return list(text.encode("utf-8", "surrogatepass"))

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return bytes(tokens)


@pytest.mark.parametrize("from_end", [False, True])
def test_a_character_cut_in_half_is_left_out_at_once(from_end: bool) -> None:
    enc = ByteEncoder()
    text = "é" * 400  # two bytes each
    assert fit_chars(enc, text, 7, from_end=from_end) == 3
    assert enc.calls == 2  # the window, then one check: no retry


def test_edge_limits() -> None:
    counter = TokenCounter(loader=CharEncoder)
    assert counter.head("abc", "gpt-4o", 0) == counter.tail("abc", "gpt-4o", -5) == ""
    assert counter.head("", "gpt-4o", 10) == ""
    assert counter.head("abc", "gpt-4o", 3) == "abc"
    assert counter.tail("abcdef", "gpt-4o", 2) == "ef"


def test_a_long_text_is_cut_without_encoding_all_of_it(exact: TokenCounter) -> None:
    recorders: list[Recording] = []

    def loader(name: str) -> Encoder:
        recorders.append(Recording(load_tiktoken(name)))
        return recorders[-1]

    counter = TokenCounter(loader=loader)
    counter.preload("gpt-4o")
    text = CODE * 2
    assert len(text) > 40_000
    for cut in (counter.head, counter.tail):
        recorders[0].encoded.clear()
        kept = cut(text, "gpt-4o", 2_000)
        assert 1_997 <= exact.count_text(kept, "gpt-4o") <= 2_000
        encoded = recorders[0].encoded
        assert max(map(len, encoded)) < len(text) / 2
        assert sum(map(len, encoded)) < len(text)


@settings(max_examples=150)
@given(
    text=st.text(alphabet=st.characters(exclude_categories=()), max_size=300),
    n=st.integers(-2, 40),
    from_tiktoken=st.booleans(),
)
def test_cuts_never_exceed_the_limit(
    exact: TokenCounter, text: str, n: int, from_tiktoken: bool
) -> None:
    counter = exact if from_tiktoken else ESTIMATING
    head, tail = counter.head(text, "gpt-4o", n), counter.tail(text, "gpt-4o", n)
    assert text.startswith(head)
    assert text.endswith(tail)
    assert counter.count_text(head, "gpt-4o") <= max(n, 0)
    assert counter.count_text(tail, "gpt-4o") <= max(n, 0)


# -- the estimator ----------------------------------------------------------------------
@settings(max_examples=200)
@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_estimator_round_trips_any_string(text: str) -> None:
    enc = EstimatingEncoder("o200k_base")
    tokens = enc.encode_ordinary(text)
    assert enc.decode_bytes(tokens) == text.encode("utf-8", "surrogatepass")
    assert (len(tokens) == 0) == (text == "")


def samples() -> dict[str, str]:
    rng = random.Random(11)
    return {
        "code": CODE,
        "prose": "The failure comes from the timezone conversion, not the rounding step. " * 80,
        "json": orjson.dumps(
            [{"id": i, "name": f"user {i}", "active": i % 2 == 0} for i in range(300)]
        ).decode(),
        "log": "".join(
            f"2024-05-0{i % 9 + 1} 12:00:{i % 60:02d} ERROR worker-{i}: timeout\n"
            for i in range(300)
        ),
        "base64": base64.b64encode(rng.randbytes(6_000)).decode(),
        "hex": rng.randbytes(4_000).hex(),
        "ascii": "".join(rng.choices(string.printable, k=8_000)),
        "random words": " ".join(
            "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(800)
        ),
        "cjk": TEXTS["cjk"],
        "emoji": TEXTS["emoji"],
        "cyrillic": "Русский текст для проверки подсчёта токенов. " * 100,
        "armenian": (
            "\u0532\u0561\u0580\u0565\u0582 \u0561\u0577\u056d\u0561\u0580\u0570 "
            "\u057d\u0561 \u0569\u0565\u057d\u057f\u0561\u0575\u056b\u0576 "
            "\u057f\u0565\u0584\u057d\u057f \u0567 "
        )
        * 100,
        "rules": ("=" * 70 + "\n" + "-" * 70 + "\n") * 50,
    }


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
def test_estimator_errs_high_on_real_text_and_never_grossly_low(
    exact: TokenCounter, model: str
) -> None:
    estimator = EstimatingEncoder(exact.encoding_name(model))
    for name, text in samples().items():
        real = exact.count_text(text, model)
        ratio = len(estimator.encode_ordinary(text)) / real
        assert ratio >= (1.0 if name in ("code", "prose", "json", "log") else 0.55), name
        assert ratio <= 8, name
