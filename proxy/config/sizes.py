"""Sizes in config: bytes, or with a unit (KB/MB/GB/TB: x1000; KiB/MiB/GiB/TiB: x1024)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policies.validate import Reader, describe
from policies.yamlsrc import KeyPath

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?", re.IGNORECASE)
_UNITS = {
    "": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


def read_size(
    read: Reader, data: Mapping[Any, Any], path: KeyPath, *, minimum: int = 1
) -> int | None:
    value = data.get(path[-1])
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        number = float(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if number is None or number < minimum:
        read.problems.add(
            path, f"expected a size in bytes (e.g. 500000000 or '500MB'), got {describe(value)}"
        )
        return None
    return int(number)
