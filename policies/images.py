"""Image input tokens, with OpenAI's tile formula (gpt-4o family).

low detail costs a flat 85. high/auto: fit within 2048x2048, scale the short side to 768,
then 170 per 512px tile plus 85. Dimensions are read from a data URL's header when
possible; a remote URL's size is unknown, so a 1024x1024 image is assumed.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Mapping

LOW_DETAIL = 85
PER_TILE = 170
ASSUMED_SIZE = (1024, 1024)


def image_part_tokens(image_url: object) -> int:
    if not isinstance(image_url, Mapping):
        return tile_tokens(*ASSUMED_SIZE)
    if image_url.get("detail") == "low":
        return LOW_DETAIL
    url = image_url.get("url")
    size = data_url_size(url) if isinstance(url, str) else None
    return tile_tokens(*(size or ASSUMED_SIZE))


def tile_tokens(width: int, height: int) -> int:
    if width <= 0 or height <= 0:
        return LOW_DETAIL
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = 768 / min(w, h)
    w, h = w * scale, h * scale
    return LOW_DETAIL + PER_TILE * math.ceil(w / 512) * math.ceil(h / 512)


def data_url_size(url: str) -> tuple[int, int] | None:
    """(width, height) from the header of a base64 PNG, GIF or JPEG data URL."""
    if not url.startswith("data:") or ";base64," not in url[:100]:
        return None
    payload = url.split(",", 1)[1]
    try:
        head = base64.b64decode(payload[:65536] + "=" * (-len(payload[:65536]) % 4))
    except (binascii.Error, ValueError):
        return None
    return _png(head) or _gif(head) or _jpeg(head)


def _png(b: bytes) -> tuple[int, int] | None:
    if b[:8] == b"\x89PNG\r\n\x1a\n" and len(b) >= 24:
        w, h = struct.unpack(">II", b[16:24])
        return int(w), int(h)
    return None


def _gif(b: bytes) -> tuple[int, int] | None:
    if b[:6] in (b"GIF87a", b"GIF89a") and len(b) >= 10:
        w, h = struct.unpack("<HH", b[6:10])
        return int(w), int(h)
    return None


def _jpeg(b: bytes) -> tuple[int, int] | None:
    if b[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 9 < len(b):
        if b[i] != 0xFF:
            return None
        marker = b[i + 1]
        seg_len = int.from_bytes(b[i + 2 : i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            h, w = struct.unpack(">HH", b[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + seg_len
    return None
