"""One secret of every built-in redaction kind, built at run time (no token-shaped literal
sits in the source), each with the fragments that must never show up once it is redacted.

A fragment is part of the secret's body with no character JSON would escape, so it can be
searched for in audit files, logs and metrics as they are stored.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from proxy.observability.audit.redact import BUILTIN


@dataclass(frozen=True, slots=True)
class Secret:
    kind: str
    """The detector that must catch it (`[REDACTED:<kind>]`)."""
    value: str
    fragments: tuple[str, ...]


def _token(prefix: str, body: str) -> Secret:
    return Secret("", prefix + body, (body[-24:],))


_B64 = "MIIEowIBAAKCAQEAx4Xf9qLm0a1Bc2De3Fg4Hi5Jk6Lm7No8Pq9Rs0Tu1Vw2Xy3Z"
_PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join(f"{_B64}{i:02d}+/==" for i in range(4))
    + "\n-----END RSA PRIVATE KEY-----"
)
_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiJoYXJkZW5pbmctY29ycHVzIiwibmFtZSI6IkVkZ2UifQ"
    + ".Qm9ndXNTaWduYXR1cmVGb3JUaGVIYXJkZW5pbmdDb3JwdXM"
)

_AWS_SECRET = "Vb7+Kq2/Lm9Np4Rs6Tu8" + "Wx0Yz2Ab4Cd6Ef8Gh0Ij"
_BASIC = base64.b64encode(b"deploy:" + b"c0rpus-Tr0ub4dor-3horse").decode()
_PASSWORD = "c0rpus-Pa55w0rd-" + "h0rse-batt3ry"


def _secrets() -> tuple[Secret, ...]:
    made = {
        "openai_key": _token("sk-proj-", "Hq7_Zt2-" * 8),
        "anthropic_key": _token("sk-ant-api03-", "Wd3_kP9-" * 8),
        "aws_access_key": Secret("", "AKIA" + "Q2HX7KQ4RZ3MBC5D", ("AKIAQ2HX7KQ4RZ3MBC5D",)),
        "github_token": _token("ghp_", "R8tY2uI4oP6aS8dF0gH2jK4lZ6xC8vB0nM2q"),
        "slack_token": _token("xoxb-", "246813579024-135792468013-cOrPuSsLaCkToKeN"),
        "jwt": Secret("", _JWT, (_JWT[40:80],)),
        "bearer_token": Secret(
            "", "Bearer tk.Vq8Lm2Np4Rs6Tu8Wx0Yz2Ab", ("tk.Vq8Lm2Np4Rs6Tu8Wx0Yz2Ab",)
        ),
        "private_key": Secret("", _PEM, (f"{_B64}01",)),
        "aws_secret_key": Secret(
            "", "AWS_SECRET_ACCESS_KEY=" + _AWS_SECRET, (_AWS_SECRET[:20], _AWS_SECRET[-20:])
        ),
        "basic_auth": Secret("", "Basic " + _BASIC, (_BASIC[:20],)),
        "url_credentials": Secret(
            "", f"https://deploy:{_PASSWORD}@registry.internal/v2", (_PASSWORD,)
        ),
    }
    return tuple(Secret(kind, s.value, s.fragments) for kind, s in made.items())


SECRETS = _secrets()
BUILTIN_KINDS = frozenset(d.name for d in BUILTIN)


def found_in(text: str) -> list[str]:
    """The kinds of secret whose fragments occur in `text`."""
    return [s.kind for s in SECRETS if any(f in text for f in s.fragments)]
