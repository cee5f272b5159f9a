"""Each built-in secret detector on a canonical secret and on its near misses, and the
checks an operator's own pattern goes through."""

from __future__ import annotations

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
