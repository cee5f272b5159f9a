"""The `prices:` section: config entries before the built-in table, validated at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.errors import ConfigError
from policies.pricing import Price
from proxy.config.loader import Config, load_config

BASE = """\
upstreams:
  openai: {base_url: "https://api.openai.com/v1"}
policies:
  off: preset:passthrough
routes:
  - {name: a, upstream: openai, policy: "off"}
"""


def load(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(BASE + text)
    return load_config(path, environ={})


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    return [str(p).removeprefix(f"{tmp_path}/") for p in info.value.problems]


def test_config_prices_override_the_builtin_table(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        'prices:\n  "gpt-4o*": {input: 5, cached_input: 2.5, output: 20}\n'
        '  "llama*": {input: 0, output: 0}\n',
    )
    assert config.prices.find("gpt-4o-2024-08-06") == ("gpt-4o*", Price(5.0, 2.5, 20.0))
    assert config.prices.find("meta/llama-3.1-70b") == ("llama*", Price(0.0, 0.0, 0.0))
    assert config.prices.find("gpt-4o-mini") == ("gpt-4o*", Price(5.0, 2.5, 20.0))
    assert config.prices.find("gpt-4.1-mini")[0] == "gpt-4.1-mini*"  # type: ignore[index]
    assert config.prices.find("my-own-model") is None


def test_cache_write_prices_are_read_and_default_to_input(tmp_path: Path) -> None:
    text = (
        'prices:\n  "c*": {input: 3, cached_input: 0.3, cache_write: 3.75, cache_write_1h: 6,'
        " output: 15}\n"
        '  "d*": {input: 2, cache_write: 2.5, output: 8}\n'
        '  "e*": {input: 1, output: 4}\n'
    )
    prices = load(tmp_path, text).prices
    assert prices.find("c-1") == ("c*", Price(3.0, 0.3, 15.0, 3.75, 6.0))
    found = [prices.find(m) for m in ("d-1", "e-1")]
    assert [(p[1].write, p[1].write_1h) for p in found if p] == [(2.5, 2.5), (1.0, 1.0)]


def test_cached_input_defaults_to_input(tmp_path: Path) -> None:
    config = load(tmp_path, 'prices:\n  "mine*": {input: 3, output: 6}\n')
    assert config.prices.find("mine-1") == ("mine*", Price(3.0, 3.0, 6.0))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'prices:\n  "gpt-4o*": {input: -1, output: 2}\n',
            "config.yaml:8: prices.gpt-4o*.input: expected US dollars per million tokens, "
            "a number >= 0, got an integer -1",
        ),
        (
            'prices:\n  "gpt-4o*": {input: 1, cached_input: 2, output: 2}\n',
            "config.yaml:8: prices.gpt-4o*.cached_input: must be <= input (1), got 2",
        ),
        (
            'prices:\n  "gpt-4o*": {input: 1, cache_write_1h: x, output: 2}\n',
            "config.yaml:8: prices.gpt-4o*.cache_write_1h: expected US dollars per million "
            "tokens, a number >= 0, got a string 'x'",
        ),
        (
            'prices:\n  "gpt-4o*": {input: 1}\n',
            "config.yaml:8: prices.gpt-4o*: missing required key 'output'",
        ),
        (
            'prices:\n  "gpt-4o*": {input: 1, output: 2, cache: 1}\n',
            "config.yaml:8: prices.gpt-4o*.cache: unknown key 'cache'",
        ),
        (
            'prices:\n  "gpt[": {input: 1, output: 2}\n',
            "config.yaml:8: prices.gpt[: model glob 'gpt[' can never match",
        ),
    ],
)
def test_problems_say_where(tmp_path: Path, text: str, expected: str) -> None:
    found = problems(tmp_path, text)
    assert any(p.startswith(expected) for p in found), found
