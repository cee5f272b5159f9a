"""Overflow rescue: reading an upstream's context-length error, tightening, relaying the rest."""

from __future__ import annotations

import asyncio
import gzip

import httpx
import orjson
import pytest

from policies.calibration import BudgetHints
from proxy.curation.rescue import (
    FALLBACK_TIGHTEN,
    MAX_ERROR_BYTES,
    TIGHTEN_MARGIN,
    Overflow,
    RescuingClient,
    halved,
    overflow_in,
    tightened,
)
from proxy.upstream.client import UpstreamRequest
from proxy.upstream.httpx_client import HttpxClient

OPENAI = (
    b'{"error": {"message": "This model\'s maximum context length is 8192 tokens. However, '
    b'your messages resulted in 8445 tokens. Please reduce the length of the messages.", '
    b'"type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}'
)
VLLM = orjson.dumps(
    {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "4600 tokens (4088 in the messages, 512 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
)


def test_openai_and_vllm_errors_are_read() -> None:
    assert overflow_in(OPENAI) == Overflow(8192, 8445, 8445)
    assert overflow_in(VLLM) == Overflow(4096, 4088, 4600)


def anthropic_error(message: str) -> bytes:
    """Anthropic's error body: a 400 `invalid_request_error`, no code."""
    return orjson.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("prompt is too long: 208437 tokens > 200000 maximum", Overflow(200000, 208437, None)),
        (
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
            "decrease input length or `max_tokens` and try again",
            Overflow(200000, 188240, 188240 + 21333),
        ),
    ],
)
def test_anthropics_errors_are_read(message: str, expected: Overflow) -> None:
    assert overflow_in(anthropic_error(message)) == expected


def test_anthropics_other_invalid_requests_are_not_overflows() -> None:
    assert overflow_in(anthropic_error("messages.1: tool_use ids were found without")) is None


def vllm_error(message: str, param: str) -> bytes:
    """vLLM's current error body (`VLLMValidationError`, answered 400)."""
    error = {"message": message, "type": "BadRequestError", "param": param, "code": 400}
    return orjson.dumps({"error": error})


@pytest.mark.parametrize(
    ("message", "param", "expected"),
    [
        (
            "This model's maximum context length is 32768 tokens. However, your request has "
            "33000 input tokens. Please reduce the length of the input messages.",
            "input_tokens",
            Overflow(32768, 33000, None),
        ),
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum "
            "context length is 32768 tokens and your request has 30000 input tokens "
            "(4096 > 32768 - 30000).",
            "max_tokens",
            Overflow(32768, 30000, 34096),
        ),
        (
            "This model's maximum context length is 8192 tokens. However, you requested 512 "
            "output tokens and your prompt contains 7900 input tokens, for a total of 8412 "
            "tokens. Please reduce the length of the input prompt or the number of requested "
            "output tokens. (parameter=input_tokens, value=7900)",
            "input_tokens",
            Overflow(8192, 7900, 8412),
        ),
        (
            "This model's maximum context length is 8192 tokens. However, you requested 512 "
            "output tokens and your prompt contains at least 7681 input tokens, for a total of "
            "at least 8193 tokens. Please reduce the length of the input prompt or the number "
            "of requested output tokens. (parameter=input_tokens, value=7681)",
            "input_tokens",
            Overflow(8192, 7681, 8193, at_least=True),
        ),
        (  # a prompt vLLM measured in characters: no token count to read
            "This model's maximum context length is 8192 tokens. However, you requested 512 "
            "output tokens and your prompt contains 78627 characters (more than 30720 "
            "characters, which is the upper bound for 7680 input tokens). Please reduce the "
            "length of the input prompt or the number of requested output tokens. "
            "(parameter=input_text, value=78627)",
            "input_text",
            Overflow(8192, None, None),
        ),
    ],
)
def test_vllms_current_errors_are_read(message: str, param: str, expected: Overflow) -> None:
    assert overflow_in(vllm_error(message, param)) == expected


def test_a_lower_bound_tightens_by_at_least_the_fallback() -> None:
    at_least = Overflow(8192, 7681, 8193, at_least=True)
    assert tightened(BudgetHints(None, 1.0), at_least, 7600).scale == pytest.approx(
        7681 / 7600 * FALLBACK_TIGHTEN
    )


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"error": {"message": "Invalid value for tool_choice", "code": "invalid_value"}}',
        b'{"error": "context"}',
    ],
)
def test_other_errors_are_not_overflows(body: bytes) -> None:
    assert overflow_in(body) is None


def test_a_code_without_numbers_is_an_overflow_of_unknown_size() -> None:
    body = b'{"error": {"message": "too long", "code": "context_length_exceeded"}}'
    assert overflow_in(body) == Overflow(None, None, None)
    assert tightened(BudgetHints(None, 1.0), Overflow(None, None, None), 1000) == BudgetHints(
        None, FALLBACK_TIGHTEN
    )


def test_tightening_divides_by_the_upstreams_ratio_and_takes_its_window() -> None:
    hints = tightened(BudgetHints(None, 1.0), Overflow(8192, 8445, 8445), 7000)
    assert hints.window == 8192
    assert hints.scale == pytest.approx(8445 / 7000 * TIGHTEN_MARGIN)
    # Never looser than the calibration already was.
    assert tightened(BudgetHints(None, 1.5), Overflow(8192, 8445, 8445), 7000).scale == (
        pytest.approx(1.5 * TIGHTEN_MARGIN)
    )


def test_a_numberless_overflow_on_an_assumed_window_halves_what_was_refused() -> None:
    # 20,000 tokens of prompt as we count them, 1.1 as the upstream does, 4,096 reserved.
    assert halved(BudgetHints(None, 1.1), 20_000, 4096) == BudgetHints(13_048, 1.1)
    assert halved(BudgetHints(None, 1.0), 0, 0).window == 1


def request(body: bytes = b"{}") -> UpstreamRequest:
    return UpstreamRequest("POST", "http://up.test/v1/chat/completions", [], body, 5, 5)


def run(handler: httpx.MockTransport, retry_to: bytes | None) -> tuple[int, bytes, int]:
    """Send through a RescuingClient: the status and body that came back, and how many
    times the retry was asked for."""
    calls: list[Overflow] = []

    async def retry(overflow: Overflow, _error: bytes) -> UpstreamRequest | None:
        calls.append(overflow)
        return request(retry_to) if retry_to is not None else None

    async def go() -> tuple[int, bytes]:
        async with handler:
            rescuing = RescuingClient(HttpxClient(handler), retry)
            response = await rescuing.send(request())
            chunks = []
            while chunk := await response.read():
                chunks.append(chunk)
            await response.aclose()
            return response.status, b"".join(chunks)

    status, body = asyncio.run(go())
    return status, body, len(calls)


def test_an_overflow_is_retried_once_with_the_new_request() -> None:
    seen: list[bytes] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.content)
        return httpx.Response(400, content=OPENAI)

    status, body, calls = run(httpx.MockTransport(handler), b'{"again": 1}')
    assert seen == [b"{}", b'{"again": 1}']
    assert (status, body, calls) == (400, OPENAI, 1)  # a second rejection is relayed


def test_a_gzipped_overflow_is_read() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.content == b"{}":
            headers = {"content-encoding": "gzip"}
            return httpx.Response(400, content=gzip.compress(OPENAI), headers=headers)
        return httpx.Response(200, content=b"ok")

    assert run(httpx.MockTransport(handler), b"small")[:2] == (200, b"ok")


@pytest.mark.parametrize(
    "error",
    [
        b'{"error": {"message": "bad tool_choice", "code": "invalid_value"}}',
        b'{"error": {"message": "' + b"x" * (2 * MAX_ERROR_BYTES) + b'"}}',
        OPENAI,  # the retry could not help: the upstream's own error goes through
    ],
)
def test_anything_not_retried_is_relayed_byte_for_byte(error: bytes) -> None:
    def handler(_req: httpx.Request) -> httpx.Response:
        return httpx.Response(400, content=error)

    status, body, _ = run(httpx.MockTransport(handler), None)
    assert (status, body) == (400, error)


def test_the_policy_key_is_read_and_checked() -> None:
    from policies.errors import ConfigError
    from policies.loader import load_policy

    def load(value: str) -> str:
        data = {"on_upstream_overflow": value}
        lines = {("on_upstream_overflow",): 3}
        return load_policy(data, name="p", file="p.yaml", lines=lines).on_upstream_overflow

    assert load_policy({}, name="p", file="p.yaml", lines={}).on_upstream_overflow == "retry"
    assert load("pass") == "pass"
    expected = r"p.yaml:3: on_upstream_overflow: expected retry \| pass"
    with pytest.raises(ConfigError, match=expected):
        load("again")
