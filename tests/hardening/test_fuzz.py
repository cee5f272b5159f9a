"""Fuzzing the three parsers a stranger controls: the chat request parser, the curators (on
any JSON a client could send), and the config loader.

Contracts checked:
- `parse_chat` / `read_request` never raise, except the limits' 400s; a body they cannot
  curate becomes a skipped plan with a known reason.
- A preset's chain either curates or raises a curator error, which the chat path turns
  into the documented `curator_error` skip; never anything that escapes `curate()`.
- `load_config` returns a Config or raises ConfigError, every problem placed in the file
  (a key path, or a line for YAML syntax).
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.errors import ConfigError, Problem
from policies.loader import load_preset
from policies.tokens import TokenCounter
from proxy.config.limits import Limits
from proxy.config.loader import load_config
from proxy.curation.plan import CurationSetup, Pending, Plan, curate, read_request
from proxy.errors import ProxyError
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.chat import CHAT
from proxy.protocols.wire import within_depth
from proxy.serving.routing import PolicyChoice
from tests.hardening.support import hardening_config

SKIP_REASONS = frozenset({"invalid_json", "not_an_object", "no_messages", "bad_messages"})
LIMIT_CODES = frozenset({"too_many_messages", "nesting_too_deep"})
CONFIG = hardening_config("http://127.0.0.1:9", limits=Limits(max_messages=20, max_json_depth=16))
SETUP = CurationSetup(CONFIG, TokenCounter(CONFIG.models))
EXAMPLES = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
ROLES = ("system", "developer", "user", "assistant", "tool", "function", "other")
KEYS = ("content", "tool_calls", "tool_call_id", "name", "function_call", "refusal", "x")


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    """A message with a real role and whatever a client might put in the usual keys."""
    message: dict[str, Any] = {"role": draw(st.sampled_from(ROLES))}
    for key in draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=4)):
        message[key] = draw(_field(key))
    return message


def _field(key: str) -> st.SearchStrategy[Any]:
    if key == "tool_calls":
        call = st.fixed_dictionaries(
            {"id": st.text(max_size=6), "type": st.just("function")},
            optional={"function": st.dictionaries(st.sampled_from(["name", "arguments"]), scalars)},
        )
        return st.one_of(st.lists(st.one_of(call, json_values), max_size=3), json_values)
    if key == "content":
        part = st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "x"])})
        return st.one_of(st.text(max_size=200), st.lists(st.one_of(part, json_values)), scalars)
    return json_values


bodies = st.fixed_dictionaries(
    {"model": st.one_of(st.sampled_from(["gpt-4o", "gpt-4", "llama-3"]), json_values)},
    optional={
        "messages": st.one_of(st.lists(messages(), max_size=30), json_values),
        "tools": json_values,
        "max_tokens": json_values,
        "stream": json_values,
    },
)


def _record() -> ExchangeRecord:
    return ExchangeRecord("r", 0.0, "POST", CHAT.path)


def _read(raw: bytes) -> tuple[Plan | Pending | ProxyError, ExchangeRecord]:
    record = _record()
    try:
        return read_request(CHAT, raw, {}, SETUP, record), record
    except ProxyError as err:
        return err, record


@EXAMPLES
@given(st.binary(max_size=300))
def test_any_bytes_are_read_or_skipped(raw: bytes) -> None:
    try:
        problem = CHAT.parse(raw, SETUP.config.server.limits).skip
    except ProxyError as err:
        problem = err.code
    assert problem is None or problem in SKIP_REASONS | LIMIT_CODES
    result, record = _read(raw)
    if isinstance(result, ProxyError):
        assert result.code in LIMIT_CODES
    elif isinstance(result, Plan):
        assert record.skip_reason in SKIP_REASONS
        assert result.body == raw  # forwarded exactly as sent


@EXAMPLES
@given(bodies)
def test_any_json_body_is_curated_skipped_or_refused_by_a_limit(body: dict[str, Any]) -> None:
    raw = orjson.dumps(body)
    result, record = _read(raw)
    if isinstance(result, ProxyError):
        assert result.status == 400
        listed = body.get("messages")
        too_many = isinstance(listed, list) and len(listed) > 20
        assert too_many if result.code == "too_many_messages" else not within_depth(body, 16)
        return
    if isinstance(result, Plan):
        assert record.skip_reason in SKIP_REASONS
        return
    assert all(isinstance(m, dict) and isinstance(m["role"], str) for m in result.wire.messages)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


@pytest.mark.parametrize("preset", ["default", "coding-agent", "chat"])
def test_presets_never_let_an_error_escape(preset: str, counter: TokenCounter) -> None:
    policy = load_preset(preset)

    @EXAMPLES
    @given(st.lists(messages(), min_size=1, max_size=12), st.sampled_from(["gpt-4o", "x"]))
    def check(listed: list[dict[str, Any]], model: str) -> None:
        raw = orjson.dumps({"model": model, "messages": listed})
        parsed = orjson.loads(raw)
        record = _record()
        request = read_request(CHAT, raw, {}, SETUP, record)
        assert isinstance(request, Pending)
        request.choice = PolicyChoice(preset, policy)
        plan = curate(request, counter)
        # curated_empty: curation would have sent `messages: []`, so the original goes.
        assert record.skip_reason in (None, "curator_error", "curated_empty")
        if record.skip_reason is None:
            out = orjson.loads(plan.body)
            assert {k: v for k, v in out.items() if k != "messages"} == {
                k: v for k, v in parsed.items() if k != "messages"
            }
        else:
            assert plan.body == raw

    check()


# -- the config loader -------------------------------------------------------------------
SECTION_NAMES = ("server", "upstreams", "models", "policies", "routes", "audit", "auth", "metrics")
yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 70_000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(alphabet=string.ascii_letters + string.digits + "-_./:*${}", max_size=20),
)
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(
                st.sampled_from(["name", "base_url", "keys", "path", "x"]), st.text(max_size=6)
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=12,
)
documents = st.dictionaries(st.sampled_from([*SECTION_NAMES, "bogus"]), yaml_values, max_size=6)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents)
def test_the_config_loader_returns_a_config_or_placed_problems(
    tmp_path: Path, document: dict[str, Any]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    problems = _problems(path)
    for problem in problems or ():
        assert problem.path or problem.line is not None or "routes" in problem.message
        assert str(problem).startswith(str(path)) or problem.file != str(path)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=string.printable, max_size=200))
def test_the_config_loader_survives_any_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    problems = _problems(path)
    assert problems is None or len(problems) > 0


def _problems(path: Path) -> list[Problem] | None:
    """The loader's problems with `path`, None when it loads; any other exception escapes."""
    try:
        load_config(path, environ={})
    except ConfigError as exc:
        return exc.problems
    return None


@EXAMPLES
@given(json_values, st.integers(1, 12))
def test_within_depth_agrees_with_a_recursive_definition(value: Any, limit: int) -> None:
    assert within_depth(value, limit) == (_depth(value) <= limit)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0
