"""observability/usage/conversation.py: the live conversation key (session header, else a
digest of the pinned prefix and first user message) and the audit store's `stored_key`."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit.readers import query
from proxy.observability.usage.conversation import (
    MAX_SESSION_CHARS,
    SESSION_HEADER,
    conversation_key,
    stored_key,
)
from tests import factories as f

DIGEST_KEY = re.compile(r"c-[0-9a-f]{16}")
SESSION_KEY = re.compile(r"s-[0-9a-f]{16}")
AGENT = [f.system("You are a coding agent."), f.user("Fix the bug.")]


# -- the client's session ----------------------------------------------------------------
def test_the_header_is_x_session_id() -> None:
    assert SESSION_HEADER == "x-session-id"
    assert MAX_SESSION_CHARS == 128


@pytest.mark.parametrize(
    ("session", "key"),
    [
        ("run-42", "run-42"),
        ("  run-42\t", "run-42"),
        ("caf\u00e9 session", "caf\u00e9 session"),
        ("x" * MAX_SESSION_CHARS, "x" * MAX_SESSION_CHARS),
        (" " + "x" * MAX_SESSION_CHARS + " ", "x" * MAX_SESSION_CHARS),
    ],
)
def test_a_usable_session_is_the_key_stripped(session: str, key: str) -> None:
    assert conversation_key(session, AGENT) == key


@pytest.mark.parametrize(
    "session",
    ["x" * (MAX_SESSION_CHARS + 1), "a\x00b", "a\tb", "line\nbreak", "bell\x07", "a\u2028b"],
)
def test_an_unusable_session_is_kept_as_its_digest(session: str) -> None:
    key = conversation_key(session, AGENT)
    assert SESSION_KEY.fullmatch(key)
    assert key == conversation_key(session, [])  # the messages play no part
    assert key != conversation_key(session + "y", AGENT)


def test_a_long_session_is_digested_after_stripping() -> None:
    long = "x" * (MAX_SESSION_CHARS + 1)
    assert conversation_key(f"  {long}\n", AGENT) == conversation_key(long, AGENT)
    assert conversation_key(long, AGENT) == "s-0b6285e2bb0cbd16"


@pytest.mark.parametrize("session", [None, "", "   ", "\t"])
def test_no_session_falls_back_to_the_messages(session: str | None) -> None:
    """A blank session is none: as a key it would pool every such client's conversations."""
    assert conversation_key(session, AGENT) == "c-c8905e2a8f22ddd4"


# -- the digest of the conversation's head -----------------------------------------------
def test_the_digest_is_stable_across_versions() -> None:
    # Keys are stored: a new digest would split every running conversation in two.
    assert conversation_key(None, AGENT) == "c-c8905e2a8f22ddd4"
    assert conversation_key(None, []) == "c-71857576257465c7"


def test_later_turns_of_a_conversation_share_its_key() -> None:
    turns = [
        *AGENT,
        *f.tool_use("call_1", "def f(): ..."),
        f.assistant("Done."),
        f.user("Now the tests."),
        f.system("A late system note."),
    ]
    assert conversation_key(None, turns) == conversation_key(None, AGENT)


@pytest.mark.parametrize(
    "other",
    [
        [f.system("You are a coding agent."), f.user("Fix the other bug.")],
        [f.system("You are a writing agent."), f.user("Fix the bug.")],
        [f.system("You are a coding agent."), f.developer(), f.user("Fix the bug.")],
        [f.user("Fix the bug.")],
        [f.system("You are a coding agent.")],
        [f.system("You are a coding agent."), f.user("Fix the bug.", name="ann")],
    ],
)
def test_another_head_is_another_conversation(other: list[dict[str, Any]]) -> None:
    key = conversation_key(None, other)
    assert DIGEST_KEY.fullmatch(key)
    assert key != conversation_key(None, AGENT)


def test_messages_before_the_first_user_that_are_not_pinned_do_not_count() -> None:
    noisy = [AGENT[0], f.assistant("Hello, how can I help?"), f.tool_result("c", "x"), AGENT[1]]
    assert conversation_key(None, noisy) == conversation_key(None, AGENT)


def test_pinned_messages_count_wherever_they_are_before_the_first_user() -> None:
    late = [f.assistant("hi"), f.developer("Be terse."), f.user("Fix the bug.")]
    assert conversation_key(None, late) == conversation_key(None, [late[1], late[2]])


def test_what_is_not_a_message_is_skipped() -> None:
    odd: list[Any] = ["text", None, 3, [f.user("inner")], *AGENT]
    assert conversation_key(None, odd) == conversation_key(None, AGENT)


def test_key_order_inside_a_message_does_not_matter() -> None:
    swapped = [{"content": m["content"], "role": m["role"]} for m in AGENT]
    assert conversation_key(None, swapped) == conversation_key(None, AGENT)


def test_a_message_json_cannot_encode_still_gets_a_key() -> None:
    odd = [f.system("s"), {"role": "user", "content": "x", "n": 2**70, 1: "int key"}]
    key = conversation_key(None, odd)
    assert DIGEST_KEY.fullmatch(key)
    assert key == conversation_key(None, odd)
    assert key != conversation_key(None, [f.system("s"), {"role": "user", "content": "x"}])


messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
            "content": st.text(max_size=8),
        }
    ),
    max_size=8,
)


@settings(max_examples=100, deadline=None)
@given(head=messages, tail=messages)
def test_only_the_messages_up_to_the_first_user_decide(
    head: list[dict[str, Any]], tail: list[dict[str, Any]]
) -> None:
    head = [*head, f.user("first")]
    upto = next(i for i, m in enumerate(head) if m["role"] == "user") + 1
    assert conversation_key(None, head + tail) == conversation_key(None, head[:upto])


# -- the audit store's key ---------------------------------------------------------------
def test_stored_key_of_nothing_is_the_empty_digest() -> None:
    assert stored_key([], []) == "e4a6a0577479b2b4"


def test_stored_key_stops_after_the_first_user_message() -> None:
    digests = [b"s" * 16, b"u" * 16, b"a" * 16, b"v" * 16]
    roles = ["system", "user", "assistant", "user"]
    key = stored_key(digests, roles)
    assert re.fullmatch(r"[0-9a-f]{16}", key)
    assert key == stored_key(digests[:2], roles[:2])
    assert key != stored_key([b"S" * 16, *digests[1:]], roles)
    assert key != stored_key(digests, ["system", "assistant", "assistant", "user"])


def test_stored_key_reads_no_further_than_the_shorter_list() -> None:
    digests = [b"s" * 16, b"d" * 16, b"u" * 16]
    assert stored_key(digests, ["system"]) == stored_key(digests[:1], ["system"])
    assert stored_key(digests[:1], ["system", "user"]) == stored_key(digests[:1], ["system"])


def test_stored_key_is_the_viewers_key_of_the_stored_record() -> None:
    original = [*AGENT, f.assistant("Done."), f.user("Thanks.")]
    digests = [query.message_digest(m) for m in original]
    roles = [m["role"] for m in original]
    assert stored_key(digests, roles) == query.record_conversation({"original": original})


@settings(max_examples=100, deadline=None)
@given(
    digests=st.lists(st.binary(min_size=16, max_size=16), max_size=8),
    roles=st.lists(st.sampled_from(["system", "developer", "user", "assistant", None]), max_size=8),
)
def test_stored_key_agrees_with_the_viewer(digests: list[bytes], roles: list[object]) -> None:
    assert stored_key(digests, roles) == query.conversation_key(digests, roles)
