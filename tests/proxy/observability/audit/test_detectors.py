"""Each built-in secret detector on a canonical secret and on its near misses, and the
checks an operator's own pattern goes through."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.errors import ParamError
from proxy.observability.audit.detectors import BUILTIN, Detector, custom_detector, min_width

BY_NAME = {d.name: d for d in BUILTIN}
PEM_BODY = "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oG"

FOUND = [
    (
        "openai_key",
        "key sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2",
        "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2",
    ),
    ("anthropic_key", "sk-ant-" + "api03-" + "x" * 30, "sk-ant-" + "api03-" + "x" * 30),
    ("aws_access_key", "id=AKIA" + "Z7Y6X5W4V3U2T1S0;", "AKIA" + "Z7Y6X5W4V3U2T1S0"),
    ("aws_secret_key", 'aws_secret_access_key = "' + "a" * 40 + '"', "a" * 40),
    ("github_token", "ghp_" + "b" * 36, "ghp_" + "b" * 36),
    ("slack_token", "xoxb-" + "1234567890-abcdef", "xoxb-" + "1234567890-abcdef"),
    ("jwt", "eyJhbGciOi.eyJzdWIiOi.sig_part-1", "eyJhbGciOi.eyJzdWIiOi.sig_part-1"),
    ("url_credentials", "postgresql://curator:s3cr3t@db:5432/audit", "s3cr3t"),
    (
        "private_key",
        f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n-----END EC PRIVATE KEY-----",
        f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n-----END EC PRIVATE KEY-----",
    ),
]


@pytest.mark.parametrize(("name", "text", "secret"), FOUND, ids=[c[0] for c in FOUND])
def test_each_detector_finds_its_secret(name: str, text: str, secret: str) -> None:
    detector = BY_NAME[name]
    match = detector.pattern.search(text)
    assert match is not None
    assert match.group(detector.group) == secret
    assert any(n in text for n in detector.needles)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("openai_key", "task-sk-" + "a" * 30),  # part of a longer word
        ("openai_key", "sk-short"),
        ("aws_access_key", "AKIA" + "Z7Y6X5W4V3U2T1S0X"),  # 17 characters: not a key id
        ("github_token", "ghp_" + "b" * 10),
        ("url_credentials", "https://example.com/path@v2"),
    ],
)
def test_near_misses_are_left_alone(name: str, text: str) -> None:
    assert BY_NAME[name].pattern.search(text) is None


def test_bearer_and_basic_need_a_credential_not_a_word() -> None:
    bearer = BY_NAME["bearer_token"]
    match = bearer.pattern.search("Authorization: Bearer " + "tok3n_" + "Q" * 20)
    assert match is not None
    assert bearer.accept is not None
    assert bearer.accept(match.group("secret"))
    # The pattern alone takes the next word after "bearer"; `accept` is what refuses prose.
    prose = bearer.pattern.search("the bearer authenticationheaderforms are")
    assert prose is not None
    assert not bearer.accept(prose.group("secret"))


def test_an_operators_pattern_is_checked() -> None:
    assert custom_detector("employee_id", r"EMP-\d{6}").pattern.search("id EMP-123456")
    with pytest.raises(ParamError, match="name"):
        custom_detector("Employee", r"EMP-\d{6}")
    with pytest.raises(ParamError, match="invalid regular expression"):
        custom_detector("bad", r"EMP-(\d")
    with pytest.raises(ParamError, match="empty string"):
        custom_detector("empty", r"x?")


def test_min_width_is_the_shortest_match() -> None:
    assert min_width(custom_detector("two", r"ab|abc").pattern) == 2


GATED = [d for d in BUILTIN if d.gate is not None]
NAME_PIECES = st.sampled_from(
    ["aws", "AWS", "_", "-", " ", "secret", "SECRET", "Secret", "session", "SESSION", "access",
     "Access", "key", "KEY", "token", "Token", "=", ": ", '"', "%3D", "x", "\u017fecret"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    detector=st.sampled_from(GATED),
    name=st.lists(NAME_PIECES, min_size=1, max_size=8).map("".join),
    value=st.text("aA0/+=", min_size=16, max_size=40),
)
def test_a_gate_finds_something_wherever_its_pattern_matches(
    detector: Detector, name: str, value: str
) -> None:
    """The gate only spares the pattern texts it has nothing to find in: it never
    hides a secret the pattern alone would find."""
    text = f"config {name}={value} end"
    if detector.pattern.search(text) is not None:
        assert detector.gate is not None
        assert detector.gate.search(text) is not None


def test_the_aws_secret_gate_passes_real_names_and_skips_code_words() -> None:
    gate = BY_NAME["aws_secret_key"].gate
    assert gate is not None
    for name in ("aws_secret_access_key", "SECRET-ACCESS-KEY", "AWS_SESSION_TOKEN"):
        assert gate.search(f"{name}=abc"), name
    assert gate.search("session = make_session(secret_store)") is None


# The built-in patterns as they were written before their edges moved behind their leading
# literals (`detectors._led`, for speed): the same matches are the contract.
_E = r"(?:(?<![{}])|(?<=%[0-9A-Fa-f]{{2}})|(?<=%25[0-9A-Fa-f]{{2}}))"
_SP = r"(?:[ \t]|%20|\+)"
EDGE_FIRST = {
    "anthropic_key": _E.format("A-Za-z0-9-") + r"sk-ant-[A-Za-z0-9_-]{20,1024}",
    "openai_key": _E.format("A-Za-z0-9-")
    + r"sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,1024}|[A-Za-z0-9]{20,1024})",
    "aws_access_key": _E.format("A-Za-z0-9") + r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    "github_token": _E.format("A-Za-z0-9")
    + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
    "slack_token": _E.format("A-Za-z0-9-") + r"xox[abpors]-[A-Za-z0-9-]{10,250}",
    "jwt": _E.format("A-Za-z0-9_-")
    + r"eyJ[A-Za-z0-9_-]{4,8192}\.eyJ[A-Za-z0-9_-]{4,16384}\.[A-Za-z0-9_-]{0,8192}",
    "bearer_token": _E.format("A-Za-z")
    + r"(?i:bearer)"
    + _SP
    + r"{1,8}(?P<secret>[A-Za-z0-9._~+/=-]{16,4096})",
    "basic_auth": _E.format("A-Za-z")
    + r"(?i:basic)"
    + _SP
    + r"{1,8}(?P<secret>[A-Za-z0-9+/=]{8,4096})",
    "aws_secret_key": _E.format("A-Za-z0-9")
    + r"(?i:(?:aws[ _-]?)?secret[ _-]?access[ _-]?key|aws[ _-]?session[ _-]?token)"
    + r"""["']?[ \t]{0,8}(?:[:=]{1,2}>?|%3[Dd]|>)[ \t]{0,8}["']?"""
    + r"(?P<secret>[A-Za-z0-9/+=]{16,2048})",
    "url_credentials": r"(?<=://)[^\s/?#@:\"'<>]{0,256}:(?P<secret>[^\s/?#@\"'<>]{1,256})@",
}
PIECES = st.sampled_from(
    ["sk-", "sk-ant-", "sk-proj-", "AKIA", "ASIA", "ghp_", "gho_", "github_pat_", "xoxb-",
     "xoxz-", "eyJ", ".", "Bearer", "bEARER", "basic", "BASIC", "Basic", " ", "\t", "%20",
     "+", "%3D", "%253D", "%2", "%25", "://", "user", ":", "@", "-", "_", "a", "Z", "0",
     "=", "/", "\n", "\u017f", "\u0131", "\u0130", "\u212a", "A1B2C3D4E5F6G7H8",
     "abcdefghij0123456789", "Zz9" * 13, "dXNlcjpwYXNz"]
)  # fmt: skip
EDGE_TEXTS = st.lists(st.one_of(PIECES, st.text(max_size=3)), max_size=30).map("".join)


@settings(max_examples=1500)
@given(text=EDGE_TEXTS)
def test_literal_led_patterns_match_what_edge_first_ones_did(text: str) -> None:
    for name, pattern in EDGE_FIRST.items():
        detector = BY_NAME[name]
        before = [m.span(detector.group) for m in re.finditer(pattern, text)]
        assert [m.span(detector.group) for m in detector.pattern.finditer(text)] == before, name


AWS_PIECES = st.sampled_from(
    ["aws", "AWS", "aWs", "aw\u017f", "_", "-", " ", "secret", "SECRET", "\u017fecret",
     "access", "ACCESS", "key", "KEY", "\u212aey", "session", "SESSION", "token", "TOKEN",
     "=", ":", "=>", '"', "'", "%3D", "%2", "%25", "x", "0", "A1B2C3D4E5F6G7H8", "/", "+",
     "\t", ">"]
)  # fmt: skip


@settings(max_examples=1500)
@given(text=st.lists(AWS_PIECES, max_size=14).map("".join))
def test_the_s_led_aws_secret_pattern_matches_what_the_edge_first_one_did(text: str) -> None:
    detector = BY_NAME["aws_secret_key"]
    before = [m.span("secret") for m in re.finditer(EDGE_FIRST["aws_secret_key"], text)]
    assert [m.span("secret") for m in detector.pattern.finditer(text)] == before


EDGE_CASES = [
    *(text for _, text, _ in FOUND),
    "%3Dsk-" + "a" * 24,
    "%253DAKIA" + "B" * 16,
    "xsk-" + "a" * 24,
    "-xoxb-" + "1" * 12,
    "_eyJaaaa.eyJbbbb.c",
    "Bearer  " + "t." * 9,
    "aBasic dXNlcjpwYXNz, basic%20dXNlcjpwYXNz",
    "\u017fk-" + "a" * 24,
    "x://u:p@h ://v:q@i",
    "xaws_secret_access_key=" + "k" * 16,
    "awssecretaccesskey: " + "k" * 16,
    "9secret_access_key=" + "k" * 16 + " AWS-SESSION-TOKEN=" + "t" * 20,
    "%3Daws session token => " + "t" * 20,
    "aws_\u017fecret_access_Key='" + "k" * 16,
]


@pytest.mark.parametrize("name", sorted(EDGE_FIRST))
def test_edge_cases_of_the_literal_led_patterns(name: str) -> None:
    detector = BY_NAME[name]
    found = 0
    for text in EDGE_CASES:
        before = [m.span(detector.group) for m in re.finditer(EDGE_FIRST[name], text)]
        assert [m.span(detector.group) for m in detector.pattern.finditer(text)] == before
        found += len(before)
    assert found, f"no case exercises {name}"
