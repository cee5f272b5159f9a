from __future__ import annotations

import base64
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.errors import ParamError
from proxy.observability.audit.redact import (
    BUILTIN,
    MASK,
    Detector,
    Redactor,
    custom_detector,
    mask,
)

# Secrets are assembled at run time so that no token-shaped literal sits in the source.
B64 = "MIIEowIBAAKCAQEAx4Xf9qLm0a1Bc2De3Fg4Hi5Jk6Lm7No8Pq9Rs0Tu1Vw2Xy3Z+/=="
PEM_RSA = "-----BEGIN RSA PRIVATE KEY-----\n" + f"{B64}\n" * 5 + "-----END RSA PRIVATE KEY-----"
PEM_OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n" + f"{B64}\n" * 3 + "-----END OPENSSH PRIVATE KEY-----"
)
PEM_ENCRYPTED = (
    "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
    "DEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n" + f"{B64}\n" * 2 + "-----END RSA PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
BASIC = base64.b64encode(b"deploy:" + b"Tr0ub4dor&3-horse").decode()
BASIC_LETTERS = base64.b64encode(b"aladdin:opensesame").decode()  # letters only
PASSWORD = "Pa55w0rd-" + "h0rse!batt3ry"

POSITIVE: dict[str, list[str]] = {
    "openai_key": [
        "sk-" + "T3BlbkFJ" * 6,
        "sk-proj-" + "Ab1_-x" * 26,
        "sk-svcacct-" + "Q7w_" * 20,
        "sk-admin-" + "z9Y8" * 10,
    ],
    "anthropic_key": ["sk-ant-api03-" + "Zz9_-a" * 15],
    "aws_access_key": ["AKIA" + "IOSFODNN7EXAMPLE", "ASIA" + "Y3FMKZQ2R7XW4N1B"],
    "github_token": [
        prefix + "a1B2c3D4e5" * 4 for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")
    ]
    + ["github_pat_" + "11ABCDEFG0" + "_" + "x1Y2z3" * 10],
    "slack_token": [f"xox{c}-" + "123456789012-1234567890123-aBcDeFgHiJ" for c in "abpors"],
    "jwt": [JWT],
    "private_key": [PEM_RSA, PEM_OPENSSH, PEM_ENCRYPTED],
}

NEAR_MISSES = [
    "sk-short123",
    "sk-" + "a" * 19,
    "task-" + "a" * 40,
    "sk-learn-compatible-estimator-interface",
    "sk-ant-tiny",
    "AKIA" + "IOSFODNN7EXAMPL",
    "AKIA" + "iosfodnn7example",
    "XAKIA" + "IOSFODNN7EXAMPLE",
    "AKIA" + "IOSFODNN7EXAMPLEX",
    "ghp_" + "a" * 35,
    "ghx_" + "a" * 36,
    "xghp_" + "a" * 36,
    "xoxz-1234567890-abcdef",
    "xoxb-short",
    "eyJhbGciOi.notajwt",
    "eyJabc.eyJdef",
    "-----BEGIN PUBLIC KEY-----\n" + B64 + "\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\n" + B64 + "\n-----END CERTIFICATE-----",
    "Bearer of bad news",
    "Bearer responsibilities",
    "the bearer token is in the vault",
    "a basic understanding of the problem",
    "Basic authentication is deprecated",
    "task-force-" + "a" * 40,
    "multitask_" + "force" * 8,
    "the secret access key is stored in the vault",
    "aws_secret_access_key = ${AWS_SECRET}",
    "http://example.com:8080/path@v2",
    "https://user@example.com/",
]

# name: (about 1 MB of text, what the redacted text starts with; None = left unchanged)
ADVERSARIAL: dict[str, tuple[str, str | None]] = {
    "uppercase run": ("A" * (1 << 20), None),
    "repeated AKIA": ("AKIA" * (1 << 18), None),
    "unclosed PEM header": ("-----BEGIN RSA PRIVATE KEY-----" + "A" * (1 << 20), "[REDACTED:"),
    "repeated PEM headers": ("-----BEGIN RSA PRIVATE KEY-----\n" * (1 << 15), "[REDACTED:"),
    "BEGIN without a key": ("-----BEGIN " * (1 << 16), None),
    "backslash run": ("\\" * (1 << 20), None),
    "unicode escapes": ("\\u0041" * (1 << 17), None),
    "repeated sk-proj-": ("sk-proj-" * (1 << 17), "[REDACTED:openai_key]"),
    "repeated eyJ": ("eyJ" * (1 << 18), None),
    "repeated github_pat_": ("github_pat_" * (1 << 16), "[REDACTED:github_token]"),
    "repeated Bearer": ("Bearer " * (1 << 17), None),
    "repeated Basic": ("Basic " * (1 << 17), None),
    "repeated %3Dsk-": ("%3Dsk-" * (1 << 17), None),
    "repeated _sk-proj-": ("_sk-proj-" * (1 << 17), "_[REDACTED:openai_key]"),
    "repeated _eyJ": ("_eyJ" * (1 << 18), None),
    "repeated %3DeyJ": ("%3DeyJ" * (1 << 17), None),
    "repeated secret_access_key=": ("secret_access_key=" * (1 << 16), None),
    "secret key then a long run": ("secret_access_key=" + "A" * (1 << 20), "secret_access_key="),
    "repeated ://a:": ("://a:" * (1 << 18), None),
    "userinfo without an @": ("://u:" + "p" * (1 << 20), None),
    "escaped unclosed PEM": (
        "-----BEGIN RSA PRIVATE KEY-----" + "\\nAAAA" * (1 << 17),
        "[REDACTED:private_key]",
    ),
}


# (detector, text, the secret inside it): detectors that keep the name or scheme readable
IN_CONTEXT: list[tuple[str, str, str]] = [
    ("aws_secret_key", "AWS_SECRET_ACCESS_KEY=" + AWS_SECRET, AWS_SECRET),
    ("aws_secret_key", "aws_secret_access_key = " + AWS_SECRET, AWS_SECRET),
    ("aws_secret_key", '"aws_secret_access_key": "' + AWS_SECRET + '"', AWS_SECRET),
    ("aws_secret_key", "export AWS_SECRET_ACCESS_KEY='" + AWS_SECRET + "'", AWS_SECRET),
    ("aws_secret_key", "AWS_SECRET_ACCESS_KEY: " + AWS_SECRET, AWS_SECRET),
    ("aws_secret_key", '{"SecretAccessKey": "' + AWS_SECRET + '"}', AWS_SECRET),
    ("aws_secret_key", "<SecretAccessKey>" + AWS_SECRET + "</SecretAccessKey>", AWS_SECRET),
    ("aws_secret_key", "aws_secret_access_key%3D" + AWS_SECRET, AWS_SECRET),
    ("aws_secret_key", "aws_session_token=" + AWS_SECRET * 8, AWS_SECRET * 8),
    ("basic_auth", "Authorization: Basic " + BASIC, BASIC),
    ("basic_auth", "Proxy-Authorization: basic " + BASIC, BASIC),
    ("basic_auth", "authorization=Basic%20" + BASIC, BASIC),
    ("basic_auth", "h=Authorization%3ABasic%20" + BASIC, BASIC),
    ("bearer_token", "h=Authorization%3ABearer%20" + "tk.Vq8Lm2Np4Rs6Tu8", "tk.Vq8Lm2Np4Rs6Tu8"),
    ("aws_secret_key", "a=1%26aws_secret_access_key%3D" + AWS_SECRET, AWS_SECRET),
    ("basic_auth", "-H 'Authorization: Basic " + BASIC_LETTERS + "'", BASIC_LETTERS),
    ("url_credentials", "postgres://admin:" + PASSWORD + "@db.internal:5432/app", PASSWORD),
    ("url_credentials", "redis://:" + PASSWORD + "@cache:6379/0", PASSWORD),
]


@pytest.mark.parametrize(("name", "text", "secret"), IN_CONTEXT)
def test_detectors_that_keep_the_context(
    redactor: Redactor, name: str, text: str, secret: str
) -> None:
    out = redactor.text(text)
    assert secret not in out
    assert out == text.replace(secret, f"[REDACTED:{name}]")


TOKENS = [(name, s) for name in ("openai_key", "anthropic_key", "github_token", "slack_token",
          "aws_access_key", "jwt") for s in POSITIVE[name][:1]]  # fmt: skip


BEFORE = ["%3D", "%3d", "%253D", "%3A", "%20", "_", "KEY_", "+"]
GLUED = [
    (name, secret, before)
    for name, secret in TOKENS
    for before in BEFORE
    if not (name == "jwt" and before.endswith("_"))  # `_` is a JWT body character
]


@pytest.mark.parametrize(("name", "secret", "before"), GLUED)
def test_a_token_after_an_escape_or_glued_to_an_underscore(
    redactor: Redactor, name: str, secret: str, before: str
) -> None:
    out = redactor.text(f"https://x/?OPENAI_API_KEY{before}{secret}&b=1")
    assert secret[-12:] not in out
    assert f"[REDACTED:{name}]&b=1" in out


def test_a_key_split_across_text_parts_of_one_message(redactor: Redactor) -> None:
    for secret in [s for secrets in POSITIVE.values() for s in secrets][::3]:
        for cut in range(0, len(secret) + 1, 3):
            parts = [
                {"type": "text", "text": "key: " + secret[:cut]},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                {"type": "text", "text": secret[cut:] + " end"},
            ]
            out = redactor.value({"role": "user", "content": parts})["content"]
            joined = out[0]["text"] + out[2]["text"]
            assert secret[-8:] not in joined, (secret, cut)
            assert secret[:8] not in joined, (secret, cut)
            assert joined.startswith("key: [REDACTED:")
            assert joined.endswith(" end")
            assert out[1] == parts[1]


def test_parts_with_whole_secrets_each_keep_their_own_label(redactor: Redactor) -> None:
    github, openai = POSITIVE["github_token"][0], POSITIVE["openai_key"][0]
    parts = [{"type": "text", "text": f"a {github} "}, {"type": "text", "text": f"{openai} b"}]
    assert redactor.value(parts) == [
        {"type": "text", "text": "a [REDACTED:github_token] "},
        {"type": "text", "text": "[REDACTED:openai_key] b"},
    ]
    # Glued, the first token's body runs on into the second part: both are still gone.
    parts[0]["text"] = f"a {github}"
    out = redactor.value(parts)
    assert out[0]["text"] == "a [REDACTED:github_token]"
    assert out[1]["text"] == " b"


def test_a_key_used_as_an_object_key_anywhere(redactor: Redactor) -> None:
    key, other = POSITIVE["openai_key"][1], POSITIVE["openai_key"][2]
    message = {
        "role": "assistant",
        key: 1,
        "tool_calls": [{"function": {"arguments": json.dumps({key: {other: "x"}})}}],
        "extra": {other: key, key: None},
    }
    out = json.dumps(redactor.value(message))
    assert key[-12:] not in out
    assert other[-12:] not in out
    assert redactor.value({key: 1, other: 2}) == {
        "[REDACTED:openai_key]": 1,
        "[REDACTED:openai_key]#2": 2,
    }


@pytest.fixture
def redactor() -> Redactor:
    return Redactor.build()


@pytest.mark.parametrize(
    ("name", "secret"), [(name, s) for name, secrets in POSITIVE.items() for s in secrets]
)
def test_builtin_detector_redacts(redactor: Redactor, name: str, secret: str) -> None:
    assert redactor.text(f"here: {secret} done") == f"here: [REDACTED:{name}] done"


@pytest.mark.parametrize("prefix", ["Bearer ", "bearer ", "Authorization: Bearer\t"])
def test_bearer_keeps_the_scheme_and_redacts_the_token(redactor: Redactor, prefix: str) -> None:
    text = f"{prefix}abc.DEF-123_ghi~jkl+mno/pqr="
    assert redactor.text(text) == f"{prefix}[REDACTED:bearer_token]"


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_alone(redactor: Redactor, text: str) -> None:
    assert redactor.text(text) == text


def test_overlapping_matches_take_the_most_specific_name(redactor: Redactor) -> None:
    key = POSITIVE["openai_key"][1]
    assert redactor.text(f"Bearer {key}") == "Bearer [REDACTED:openai_key]"


def test_unclosed_pem_header_still_removes_the_key_material(redactor: Redactor) -> None:
    text = "-----BEGIN PRIVATE KEY-----\n" + B64 + "\n" + B64 + "\n(truncated)"
    assert redactor.text(text) == "[REDACTED:private_key](truncated)"


def test_redaction_is_idempotent(redactor: Redactor) -> None:
    text = " ".join(s for secrets in POSITIVE.values() for s in secrets)
    once = redactor.text(text)
    assert redactor.text(once) == once
    assert all(s not in once for secrets in POSITIVE.values() for s in secrets)


def test_pem_inside_a_json_string_with_escaped_newlines(redactor: Redactor) -> None:
    arguments = json.dumps({"path": "id_rsa", "content": PEM_RSA + "\n"})
    assert "\\n" in arguments
    out = redactor.text(arguments)
    assert json.loads(out) == {"path": "id_rsa", "content": "[REDACTED:private_key]\n"}


def test_key_spelled_with_unicode_escapes(redactor: Redactor) -> None:
    key = POSITIVE["openai_key"][1]
    escaped = "".join(f"\\u{ord(c):04x}" if c in "-_" else c for c in key)
    arguments = '{"api_key": "' + escaped + '", "n": 1}'
    out = redactor.text(arguments)
    assert json.loads(out) == {"api_key": "[REDACTED:openai_key]", "n": 1}


def test_fully_escaped_key_is_found(redactor: Redactor) -> None:
    key = POSITIVE["aws_access_key"][0]
    escaped = "".join(f"\\u{ord(c):04X}" for c in key)
    assert json.loads(redactor.text(f'"{escaped}"')) == "[REDACTED:aws_access_key]"


def test_json_inside_a_json_string(redactor: Redactor) -> None:
    twice = json.dumps(json.dumps({"key": PEM_OPENSSH}))
    out = redactor.text(twice)
    assert json.loads(json.loads(out)) == {"key": "[REDACTED:private_key]"}


secrets_st = st.sampled_from([s for secrets in POSITIVE.values() for s in secrets])


@settings(max_examples=60, deadline=None)
@given(
    before=st.text(max_size=40), secret=secrets_st, after=st.text(max_size=40), nest=st.booleans()
)
def test_secrets_in_json_text_are_gone_and_json_stays_valid(
    before: str, secret: str, after: str, nest: bool
) -> None:
    redactor = Redactor.build()
    value: object = {"note": before + " " + secret + " " + after}
    text = json.dumps(value, ensure_ascii=nest)
    out = redactor.text(json.dumps(text) if nest else text)
    decoded = json.loads(json.loads(out)) if nest else json.loads(out)
    assert secret not in decoded["note"]
    assert "[REDACTED:" in decoded["note"]


def test_value_redacts_nested_structures_and_keys(redactor: Redactor) -> None:
    key = POSITIVE["github_token"][0]
    value = {key: [key, {"n": 3, "ok": True, "none": None}], "t": (key,)}
    assert redactor.value(value) == {
        "[REDACTED:github_token]": ["[REDACTED:github_token]", {"n": 3, "ok": True, "none": None}],
        "t": ["[REDACTED:github_token]"],
    }


def test_custom_pattern_adds_to_builtins() -> None:
    emp = custom_detector("employee_id", "EMP-[0-9]{6}")
    redactor = Redactor.build(custom=[emp])
    key = POSITIVE["openai_key"][0]
    text = f"EMP-123456 and {key} but not EMP-12345"
    assert (
        redactor.text(text) == "[REDACTED:employee_id] and [REDACTED:openai_key] but not EMP-12345"
    )


def test_builtins_can_be_switched_off() -> None:
    redactor = Redactor.build(builtin=False, custom=[custom_detector("emp", "EMP-[0-9]{6}")])
    key = POSITIVE["openai_key"][0]
    assert redactor.text(f"EMP-000001 {key}") == f"[REDACTED:emp] {key}"


@pytest.mark.parametrize(
    ("name", "regex", "field", "message"),
    [
        ("emp", "EMP-(", "regex", "invalid regular expression"),
        ("emp", "a*", "regex", "empty string"),
        ("emp", "x?(?=y)", "regex", "empty string"),
        ("emp", r"\b", "regex", "empty string"),
        ("emp", "abc|", "regex", "empty string"),
        ("Emp ID", "EMP", "name", "lower-case"),
        ("", "EMP", "name", "lower-case"),
    ],
)
def test_custom_pattern_validation(name: str, regex: str, field: str, message: str) -> None:
    with pytest.raises(ParamError) as caught:
        custom_detector(name, regex)
    assert caught.value.field == field
    assert message in caught.value.message


def test_mask_replaces_every_string_and_keeps_plain_keys() -> None:
    value = {"a": "secret", "b": [1, "x", None, True, 2.5], "c": b"raw", "d": {"e": ("f",)}}
    assert mask(value) == {
        "a": MASK,
        "b": [1, MASK, None, True, 2.5],
        "c": MASK,
        "d": {"e": [MASK]},
    }
    key = POSITIVE["openai_key"][0]
    assert mask({"role": "user", key: "x", "Key 2": 1}) == {
        "role": MASK,
        f"{MASK}#1": MASK,
        f"{MASK}#2": 1,
    }


def test_a_detector_runs_only_when_its_needle_occurs() -> None:
    seen: list[str] = []

    def accept(token: str) -> bool:
        seen.append(token)
        return True

    det = Detector("thing", re.compile(r"[a-z]{3}"), needles=("zzz",), accept=accept)
    redactor = Redactor([det])
    assert redactor.text("abc def") == "abc def"
    assert seen == []
    assert redactor.text("abc zzz") == "[REDACTED:thing] [REDACTED:thing]"


_ESCAPED_OR_CLASS = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]")
_UNBOUNDED = re.compile(r"[*+]|\{\d*,\}")


def unbounded_quantifiers(source: str) -> list[str]:
    """Unbounded repetition in a pattern: `*`, `+` or `{n,}` outside classes and escapes."""
    return _UNBOUNDED.findall(_ESCAPED_OR_CLASS.sub("", source))


def test_the_quantifier_scan_catches_unbounded_patterns() -> None:
    assert unbounded_quantifiers(r"sk-[A-Za-z0-9+*]{20,40}\+\*") == []
    assert unbounded_quantifiers(r"sk-[A-Za-z0-9]+") == ["+"]
    assert unbounded_quantifiers(r"(?:ab)*c") == ["*"]
    assert unbounded_quantifiers(r"x{3,}") == ["{3,}"]


@pytest.mark.parametrize("detector", BUILTIN, ids=lambda d: d.name)
def test_builtin_patterns_use_bounded_quantifiers_only(detector: Detector) -> None:
    assert unbounded_quantifiers(detector.pattern.pattern) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("text", "expected"), ADVERSARIAL.values(), ids=list(ADVERSARIAL))
def test_adversarial_megabyte_inputs_complete(
    redactor: Redactor, text: str, expected: str | None
) -> None:
    # Bounded quantifiers keep this linear; the timeout only catches a regression to
    # catastrophic backtracking, it does not measure speed.
    out = redactor.text(text)
    if expected is None:
        assert out == text
    else:
        assert out.startswith(expected)
        assert len(out) < len(text)


def test_pieces_of_known_secrets_are_removed_wherever_a_cut_falls(redactor: Redactor) -> None:
    for secret in (POSITIVE["openai_key"][1], PEM_RSA, POSITIVE["github_token"][0]):
        known = redactor.found([{"content": f"key {secret} here"}])
        assert [s for s, _ in known] == [secret]
        careful = redactor.with_known(known)
        for cut in range(0, len(secret), 7):
            head, tail = secret[:cut], secret[cut:]
            out = careful.text(f"{head}\n[... truncated ...]\n{tail}")
            for piece in (head, tail):
                if len(piece) >= 12:
                    assert piece not in out, (secret[:12], cut)
                    assert piece[-12:] not in out
                    assert piece[:12] not in out
    assert redactor.text("no pieces without known secrets") == "no pieces without known secrets"


def test_remembered_short_texts_do_not_leak_into_a_careful_twin() -> None:
    redactor = Redactor.build()
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0L1m2N3"
    piece = secret[-16:]  # its end: alone, it looks like nothing
    assert redactor.text(piece) == piece
    twin = redactor.with_known(redactor.found([secret]))
    assert piece not in twin.text(piece)  # the twin knows the secret: the piece goes
    assert redactor.text(piece) == piece  # and the original's memory is unchanged
