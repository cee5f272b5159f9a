"""The `auth:` section read directly through a `Reader` (auth.py): AuthConfig, the key lists,
what is wrong with a key, and problems that never quote one."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.validate import Problems, Reader
from proxy.config.auth import AUTH_KEYS, AuthConfig, key_problem, read_auth

PATH = ("auth",)
EMPTY = "expected a non-empty key (is its ${VARIABLE} set?), got "
NOT_ASCII = "expected printable ASCII without spaces (it is sent as a Bearer token)"


def read(value: object) -> tuple[AuthConfig, list[tuple[str, str]]]:
    """`value` read as the `auth:` section: the config and the (path, message) problems."""
    problems = Problems("config.yaml", {})
    config = read_auth(Reader(problems), value, PATH)
    return config, [(p.path, p.message) for p in problems.items]


# -- AuthConfig --------------------------------------------------------------------------


def test_the_defaults_need_no_key() -> None:
    auth = AuthConfig()
    assert (auth.keys, auth.allow_unauthenticated, auth.admin_keys) == ((), False, ())
    assert auth.enabled is False


def test_keys_enable_it_and_admin_keys_alone_do_not() -> None:
    assert AuthConfig(keys=("k",)).enabled is True
    assert AuthConfig(admin_keys=("adm",)).enabled is False
    assert AuthConfig(allow_unauthenticated=True).enabled is False


def test_the_section_knows_exactly_three_keys() -> None:
    assert AUTH_KEYS == ("keys", "allow_unauthenticated", "admin_keys")


# -- read_auth ---------------------------------------------------------------------------


def test_a_full_section_is_read_in_order() -> None:
    config, problems = read(
        {"keys": ["ck-2", "ck-1"], "allow_unauthenticated": True, "admin_keys": ["adm-1"]}
    )
    assert problems == []
    assert config == AuthConfig(
        keys=("ck-2", "ck-1"), allow_unauthenticated=True, admin_keys=("adm-1",)
    )


@pytest.mark.parametrize(
    "value",
    [{}, {"keys": None, "admin_keys": None}, {"keys": [], "admin_keys": []}],
    ids=["empty", "nulls", "empty-lists"],
)
def test_an_empty_section_is_the_default(value: object) -> None:
    assert read(value) == (AuthConfig(), [])


@pytest.mark.parametrize(
    ("value", "got"), [(None, "null"), ("keys", "a string 'keys'"), ([1], "a list")]
)
def test_a_section_that_is_not_a_mapping_is_one_problem(value: object, got: str) -> None:
    assert read(value) == (AuthConfig(), [("auth", f"expected a mapping, got {got}")])


def test_an_unknown_key_is_named_with_a_suggestion() -> None:
    config, problems = read({"admin_key": ["adm-1"], "keys": ["ck-1"]})
    assert problems == [("auth.admin_key", "unknown key 'admin_key'; did you mean 'admin_keys'?")]
    assert config == AuthConfig(keys=("ck-1",))


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_allow_unauthenticated_must_be_a_boolean(value: object) -> None:
    config, problems = read({"allow_unauthenticated": value, "keys": ["ck-1"]})
    assert config == AuthConfig(keys=("ck-1",), allow_unauthenticated=False)
    assert len(problems) == 1
    path, message = problems[0]
    assert path == "auth.allow_unauthenticated"
    assert message.startswith("expected true or false, got ")


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("ck-secret-as-a-string", "a string"),
        ({"a": "ck-secret"}, "a mapping"),
        (7, "an integer"),
        (True, "a boolean"),
        (1.5, "a number"),
        (("ck-secret",), "tuple"),
    ],
)
@pytest.mark.parametrize("field", ["keys", "admin_keys"])
def test_a_key_list_that_is_not_a_list_says_only_its_kind(
    field: str, value: object, kind: str
) -> None:
    config, problems = read({field: value})
    assert config == AuthConfig()
    assert problems == [(f"auth.{field}", f"expected a list of keys, got {kind}")]
    assert "secret" not in problems[0][1]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", EMPTY + "an empty string"),
        (None, EMPTY + "null"),
        (7, EMPTY + "an integer"),
        (False, EMPTY + "a boolean"),
        (2.5, EMPTY + "a number"),
        ({"k": "v"}, EMPTY + "a mapping"),
        (["ck-1"], EMPTY + "a list"),
        (b"ck-1", EMPTY + "bytes"),
        ("ck with space", NOT_ASCII),
        ("ck\tx", NOT_ASCII),
        ("ck\x7f", NOT_ASCII),
        ("clé", NOT_ASCII),
        (" ck-1", NOT_ASCII),
    ],
)
def test_key_problems(key: object, message: str) -> None:
    assert key_problem(key) == message


@pytest.mark.parametrize("key", ["!", "~", "!~", "ck-AZaz09._~+/=", "x" * 4096])
def test_printable_ascii_keys_are_usable(key: str) -> None:
    assert key_problem(key) is None


@pytest.mark.parametrize("edge", ["\x20", "\x7f"])
def test_the_bounds_of_printable_ascii(edge: str) -> None:
    """'!' (0x21) and '~' (0x7e) are in; the characters just outside them are not."""
    assert key_problem("a" + edge) == NOT_ASCII


def test_bad_entries_are_reported_each_at_its_index_and_left_out() -> None:
    config, problems = read({"keys": ["ck-1", "", 7, "ck 2", "ck-3"]})
    assert config.keys == ("ck-1", "ck-3")
    assert problems == [
        ("auth.keys[1]", EMPTY + "an empty string"),
        ("auth.keys[2]", EMPTY + "an integer"),
        ("auth.keys[3]", NOT_ASCII),
    ]


def test_a_duplicate_names_the_first_occurrence_and_is_kept_once() -> None:
    config, problems = read({"keys": ["ck-1", "ck-2", "ck-1", "ck-2"]})
    assert config.keys == ("ck-1", "ck-2")
    assert problems == [
        ("auth.keys[2]", "duplicate key (also keys[0])"),
        ("auth.keys[3]", "duplicate key (also keys[1])"),
    ]


def test_the_two_lists_are_read_independently() -> None:
    config, problems = read({"keys": ["ck-1", ""], "admin_keys": ["adm-1", None, "adm-1"]})
    assert config == AuthConfig(keys=("ck-1",), admin_keys=("adm-1",))
    paths = [path for path, _ in problems]
    assert paths == ["auth.keys[1]", "auth.admin_keys[1]", "auth.admin_keys[2]"]
    assert problems[2][1] == "duplicate key (also admin_keys[0])"


def test_a_duplicate_names_where_the_first_one_stands_in_the_list() -> None:
    _, problems = read({"keys": ["", "ck-1", "ck-1"]})
    assert problems[1] == ("auth.keys[2]", "duplicate key (also keys[1])")


def test_problems_never_quote_a_key() -> None:
    secret = "ck-Sup3rSecretValue"
    values = [secret, secret, f"{secret} x", f"{secret}\x00", "", None]
    _, problems = read({"keys": values, "admin_keys": values})
    assert len(problems) == 11  # five in each list, and the key both hold
    assert not [m for _, m in problems if "Sup3rSecret" in m]


# -- properties --------------------------------------------------------------------------

entries = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["ck-1", "ck-2", "adm", "!", "~"]),
    st.none(),
    st.integers(),
    st.booleans(),
)
NEAR_ASCII = st.sampled_from(" !~\x7f\x1f\té") | st.characters(
    min_codepoint=0x21, max_codepoint=0x7E
)
"""Printable ASCII, and the characters just outside it."""
MESSAGES = re.compile(
    re.escape(NOT_ASCII)
    + r"|duplicate key \(also (admin_)?keys\[\d+\]\)"
    + "|"
    + re.escape(EMPTY)
    + r"(an empty string|null|an integer|a boolean)"
)


@settings(max_examples=100, deadline=None)
@given(st.lists(entries, max_size=10))
def test_usable_keys_are_kept_once_in_order_and_every_other_entry_is_one_problem(
    values: list[object],
) -> None:
    config, problems = read({"keys": values})
    usable = [v for v in values if isinstance(v, str) and key_problem(v) is None]
    assert list(config.keys) == list(dict.fromkeys(usable))
    assert len(problems) == len(values) - len(config.keys)
    assert all(path.startswith("auth.keys[") for path, _ in problems)
    # Every message is one of a fixed few: none can carry a key's text.
    assert all(MESSAGES.fullmatch(message) for _, message in problems), problems


@settings(max_examples=100, deadline=None)
@given(st.text(NEAR_ASCII, max_size=20) | st.text(max_size=20))
def test_a_key_is_usable_exactly_when_it_is_non_empty_printable_ascii(key: str) -> None:
    usable = key != "" and all(0x21 <= ord(c) <= 0x7E for c in key)
    assert (key_problem(key) is None) is usable


def test_a_key_in_both_lists_is_refused_where_the_admin_list_has_it() -> None:
    config, problems = read(
        {"keys": ["", "ck-1", "shared"], "admin_keys": ["adm-1", "shared", "shared", "ck-1"]}
    )
    assert config == AuthConfig(keys=("ck-1", "shared"), admin_keys=("adm-1",))
    shared = "also a client key (keys[2]): an admin key must be apart"
    assert problems == [
        ("auth.keys[0]", problems[0][1]),
        ("auth.admin_keys[1]", shared),
        ("auth.admin_keys[2]", shared),  # each time it is listed
        ("auth.admin_keys[3]", "also a client key (keys[1]): an admin key must be apart"),
    ]


@settings(max_examples=100, deadline=None)
@given(st.lists(entries, max_size=6), st.lists(entries, max_size=6))
def test_no_key_opens_both_the_upstream_and_the_viewer(
    keys: list[object], admin: list[object]
) -> None:
    config, problems = read({"keys": keys, "admin_keys": admin})
    assert not set(config.keys) & set(config.admin_keys)
    shared = [k for k in admin if isinstance(k, str) and k in config.keys]
    assert len([p for p, m in problems if m.startswith("also a client key")]) == len(shared)
