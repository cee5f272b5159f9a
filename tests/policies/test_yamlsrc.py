"""YAML with lines (`policies.yamlsrc`): key paths, located problems, files, `${VAR}` typing.

The loader's own tests cover the basics (lines of keys, duplicates, merges, syntax errors,
`substitute` forms); these cover the rest of the module directly.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.envsubst import substitute
from policies.errors import ConfigError
from policies.yamlsrc import Located, format_path, line_of, parse, parse_file


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    return [str(p) for p in parse(text, "f.yaml", env=env).problems]


# -- key paths and lines ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ((), ""),
        (("a",), "a"),
        (("policies", "agents", "curators", 2), "policies.agents.curators[2]"),
        ((0,), "[0]"),
        ((0, "a", 1, 2, "b"), "[0].a[1][2].b"),
        (("a", 3), "a[3]"),
    ],
)
def test_format_path(path: tuple[str | int, ...], expected: str) -> None:
    assert format_path(path) == expected


def test_format_path_takes_any_iterable() -> None:
    assert format_path(iter(["a", 1])) == "a[1]"


def test_line_of_falls_back_to_the_nearest_ancestor() -> None:
    lines = {(): 1, ("a",): 2, ("a", "b"): 5}
    assert line_of(lines, ("a", "b")) == 5
    assert line_of(lines, ("a", "b", 0, "c")) == 5
    assert line_of(lines, ("a", "x")) == 2
    assert line_of(lines, ("z",)) == 1
    assert line_of({}, ("a",)) is None
    assert line_of({("a",): 4}, ("b",)) is None


def test_located_line_reads_its_own_lines() -> None:
    located = Located({"a": 1}, "f.yaml", {("a",): 7})
    assert located.line(("a", "deeper")) == 7
    assert located.line(("other",)) is None
    assert located.problems == ()


def test_an_empty_document_is_none_at_line_one() -> None:
    located = parse("", "f.yaml")
    assert (located.data, located.file, located.lines, located.problems) == (
        None,
        "f.yaml",
        {(): 1},
        (),
    )


def test_a_bare_scalar_document() -> None:
    located = parse("\n\nhello\n", "f.yaml")
    assert located.data == "hello"
    assert located.line(()) == 3


def test_an_alias_reused_twice_is_not_recursive() -> None:
    located = parse("a: &x {b: [1, 2]}\nc: *x\nd: *x\n", "f.yaml")
    assert located.problems == ()
    assert located.data == {"a": {"b": [1, 2]}, "c": {"b": [1, 2]}, "d": {"b": [1, 2]}}
    # Each use gets its own copy: editing one must not change another.
    assert located.data["c"] is not located.data["d"]
    assert (located.line(("c",)), located.line(("d",))) == (2, 3)


def test_a_nested_duplicate_names_its_full_path_and_both_lines() -> None:
    assert problems("a:\n  b: 1\n  c: 2\n  b: 3\n") == [
        "f.yaml:4: a.b: duplicate key 'b' (first on line 2)"
    ]
    assert parse("a:\n  b: 1\n  b: 3\n", "f.yaml").data == {"a": {"b": 3}}


def test_a_key_repeated_three_times_cites_the_first() -> None:
    assert problems("k: 1\nk: 2\nk: 3\n") == [
        "f.yaml:3: k: duplicate key 'k' (first on line 1)",
        "f.yaml:3: k: duplicate key 'k' (first on line 1)",
    ]


def test_keys_keep_the_text_the_user_wrote_except_ints() -> None:
    located = parse("1.5: a\n2: b\nnull: c\non: d\n~: e\n", "f.yaml")
    assert located.data == {"1.5": "a", 2: "b", "null": "c", "on": "d", "~": "e"}
    assert located.problems == ()


@pytest.mark.parametrize("key", ["[a, b]", "{a: 1}"])
def test_a_list_or_mapping_key_is_one_problem(key: str) -> None:
    # Keys are read twice (for duplicates, then for values): the problem is reported once.
    located = parse(f"top:\n  a: 0\n  ? {key}\n  : 1\n", "f.yaml")
    kind = "list" if key.startswith("[") else "mapping"
    # At the key's own line (3), not the line of the mapping that holds it (1).
    assert [str(p) for p in located.problems] == [
        f"f.yaml:3: top.<{kind} key on line 3>: keys must be plain values, not lists or mappings"
    ]
    assert located.data == {"top": {"a": 0, f"<{kind} key on line 3>": 1}}


def test_a_merge_of_a_scalar_is_a_problem_at_the_mapping() -> None:
    located = parse("x: 0\nm:\n  <<: 1\n  y: 2\n", "f.yaml")
    (problem,) = located.problems
    assert str(problem).startswith("f.yaml:2: m: invalid merge: expected a mapping")
    assert located.data["x"] == 0


def test_a_merge_of_a_list_of_mappings() -> None:
    text = "a: &a {x: 1}\nb: &b {x: 2, y: 2}\nm:\n  <<: [*a, *b]\n  z: 3\n"
    located = parse(text, "f.yaml")
    assert located.problems == ()
    assert located.data["m"] == {"x": 1, "y": 2, "z": 3}


def test_a_bad_tagged_value_in_a_list_is_located_by_index() -> None:
    located = parse("a:\n  - 1\n  - !!int nope\n", "f.yaml")
    assert located.data == {"a": [1, None]}
    (problem,) = located.problems
    assert (problem.line, problem.path) == (3, "a[1]")
    assert problem.message.startswith("invalid value: invalid literal for int()")


def test_bad_base64_is_a_problem_not_an_exception() -> None:
    (problem,) = parse("a: !!binary A\n", "f.yaml").problems
    assert problem.message.startswith("invalid value: failed to decode base64")


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"])
def test_control_characters_raise_invalid_yaml_without_a_line(char: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(f"a: b{char}\n", "f.yaml")
    (problem,) = info.value.problems
    assert (problem.file, problem.line, problem.path) == ("f.yaml", None, "")
    assert problem.message.startswith("invalid YAML: unacceptable character")


# -- files ------------------------------------------------------------------------------


def test_parse_file_names_the_file(tmp_path: Path) -> None:
    file = tmp_path / "p.yaml"
    file.write_text("a: 1\na: 2\n", encoding="utf-8")
    located = parse_file(file)
    assert located.file == str(file)
    assert located.data == {"a": 2}
    assert [p.file for p in located.problems] == [str(file)]


def test_parse_file_substitutes_from_env(tmp_path: Path) -> None:
    file = tmp_path / "p.yaml"
    file.write_text("port: ${PORT}\n", encoding="utf-8")
    assert parse_file(file, env={"PORT": "9000"}).data == {"port": 9000}
    assert parse_file(file).data == {"port": "${PORT}"}


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        parse_file(missing)
    (problem,) = info.value.problems
    assert (problem.file, problem.line, problem.path) == (str(missing), None, "")
    assert problem.message == "cannot read: No such file or directory"


def test_a_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        parse_file(tmp_path)
    assert info.value.problems[0].message.startswith("cannot read: ")


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    file = tmp_path / "latin1.yaml"
    file.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        parse_file(file)
    (problem,) = info.value.problems
    assert problem.message == "cannot read: not UTF-8 text (byte 9)"


# -- ${VAR} substitution inside documents -----------------------------------------------

ENV = {"PORT": "8080", "LIST": "[1, 2]", "MAP": "a: b", "ON": "true", "EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v: ${PORT}", 8080),
        ("v: '${PORT}'", "8080"),
        ('v: "${PORT}"', "8080"),
        ("v: |\n  ${PORT}", "8080\n"),
        ("v: ${KEY:-}", None),
        ("v: ${EMPTY}", None),
        ("v: ${ON}", True),
        ("v: ${F:-1.5}", 1.5),
        ("v: ${D:-2024-01-02}", datetime.date(2024, 1, 2)),
        ("v: x${PORT}y", "x8080y"),
        ("v: ${LIST}", "[1, 2]"),
        ("v: ${MAP}", "a: b"),
        ("v: $${PORT}", "${PORT}"),
        ("v: '$$'", "$"),
    ],
)
def test_a_plain_substituted_scalar_is_typed_by_yaml_a_quoted_one_stays_text(
    text: str, expected: object
) -> None:
    located = parse(text + "\n", "f.yaml", env=ENV)
    assert located.problems == ()
    assert located.data == {"v": expected}
    assert type(located.data["v"]) is type(expected)


def test_substitution_applies_in_lists_but_never_to_keys() -> None:
    located = parse("${PORT}:\n  - ${PORT}\n  - '${PORT}'\n", "f.yaml", env=ENV)
    assert located.data == {"${PORT}": [8080, "8080"]}


def test_an_env_value_is_not_expanded_again() -> None:
    located = parse("v: ${A}\n", "f.yaml", env={"A": "${B}", "B": "no"})
    assert located.problems == ()
    assert located.data == {"v": "${B}"}


def test_without_env_references_stay_text() -> None:
    assert parse("v: ${PORT}\n", "f.yaml").data == {"v": "${PORT}"}


def test_a_missing_variable_is_located_and_the_text_kept() -> None:
    located = parse("a:\n  b: 1\n  c: ${NOPE}\n", "f.yaml", env={})
    assert located.data == {"a": {"b": 1, "c": "${NOPE}"}}
    (problem,) = located.problems
    assert (problem.line, problem.path) == (3, "a.c")
    assert problem.message.startswith("environment variable 'NOPE' is not set")


def test_every_bad_reference_in_a_value_is_reported() -> None:
    assert problems("v: ${A}-${1X}-${B}\n", env={}) == [
        "f.yaml:1: v: environment variable 'A' is not set (use ${A:-default} for a default)",
        "f.yaml:1: v: malformed variable reference '${1X}': expected ${NAME} or "
        "${NAME:-default} (write $$ for a literal $)",
        "f.yaml:1: v: environment variable 'B' is not set (use ${B:-default} for a default)",
    ]


@pytest.mark.parametrize("value", ["2024-13-45", "2024-02-30 10:00:00"])
def test_a_substituted_value_yaml_cannot_build_is_a_problem_not_a_crash(value: str) -> None:
    # Written out, `v: 2024-13-45` is a located problem; through ${VAR} it must be too.
    assert problems("v: 2024-13-45\n")[0].startswith("f.yaml:1: v: invalid value:")
    located = parse("x: 1\nv: ${V}\n", "f.yaml", env={"V": value})
    (problem,) = located.problems
    assert (problem.line, problem.path) == (2, "v")
    assert problem.message.startswith("invalid value")
    assert located.data["x"] == 1


# -- substitute ----------------------------------------------------------------------------

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)


@settings(max_examples=60)
@given(text=st.text(max_size=40))
def test_doubled_dollars_always_read_back_as_the_text(text: str) -> None:
    assert substitute(text.replace("$", "$$"), {}) == (text, [])


@settings(max_examples=60)
@given(name=NAMES, value=st.text(min_size=1, max_size=20), default=st.text(max_size=20))
def test_a_set_variable_wins_over_its_default(name: str, value: str, default: str) -> None:
    body = default.split("}")[0]  # a default runs to the first `}`; it is never expanded
    assert substitute(f"<${{{name}:-{body}}}>", {name: value}) == (f"<{value}>", [])
    assert substitute(f"<${{{name}:-{body}}}>", {}) == (f"<{body}>", [])


def test_text_without_a_dollar_is_unchanged() -> None:
    assert substitute("plain {text} here", {"text": "x"}) == ("plain {text} here", [])
