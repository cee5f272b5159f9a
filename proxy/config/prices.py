"""The `prices:` config section -> `PriceTable`, validated at load with `file:line: key.path`.

```yaml
prices:                       # US dollars per million tokens; first matching glob wins
  "gpt-4o*": {input: 2.50, cached_input: 1.25, output: 10.00}
  "claude-sonnet-4*": {input: 3, cached_input: 0.3, cache_write: 3.75, cache_write_1h: 6,
                       output: 15}
  "llama-3.1-70b*": {input: 0, output: 0}    # self-hosted: count tokens, cost nothing
```
Entries come before the built-in table (`policies.pricing.BUILTIN`), so a config overrides
a default by naming the same glob, or a narrower one. `cached_input` defaults to `input`
(an upstream without a prompt-cache discount); `cache_write` (a 5-minute or unspecified
cache write) defaults to `input` (no surcharge), `cache_write_1h` to `cache_write`.
"""

from __future__ import annotations

from typing import Any

from policies.pricing import Price, PriceTable
from policies.validate import Reader
from policies.yamlsrc import KeyPath

KEYS = ("input", "cached_input", "cache_write", "cache_write_1h", "output")


def read_prices(read: Reader, value: object, path: KeyPath) -> PriceTable:
    """Read a `prices:` mapping, reporting problems into the loader's shared `Reader`."""
    entries: list[tuple[str, Price]] = []
    for glob, item, item_path in read.globs(value, path):
        data = read.mapping(item, item_path, KEYS)
        if data is None:
            continue
        read.require(data, ("input", "output"), item_path)
        price_in = float(read.get(data, "input", item_path, 0.0, _price))
        cached = float(read.get(data, "cached_input", item_path, price_in, _price))
        if cached > price_in:
            message = f"must be <= input ({price_in:g}), got {cached:g}"
            read.problems.add((*item_path, "cached_input"), message)
        output = float(read.get(data, "output", item_path, 0.0, _price))
        write = _optional(read.get(data, "cache_write", item_path, None, _price))
        write_1h = _optional(read.get(data, "cache_write_1h", item_path, None, _price))
        entries.append((glob, Price(price_in, cached, output, write, write_1h)))
    return PriceTable.with_overrides(entries)


def _optional(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _price(value: Any) -> str | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    ok = ok and value == value and value != float("inf")  # neither NaN nor infinite
    return None if ok else "expected US dollars per million tokens, a number >= 0"
