"""Tokens for content parts that are not text: images, audio, files.

Images use OpenAI's tile formula (gpt-4o family): `detail: low` costs a flat 85. Otherwise
the image is shrunk to fit 2048x2048, then shrunk so its short side is at most 768 (never
enlarged), and costs 85 plus 170 per 512px tile. Models with smaller per-tile prices
(o1/o3 75+150, gpt-5 70+140) are counted the same way: a little high, never low.

The small models OpenAI lists with the patch formula (`PATCH_MODELS`) see an image as
32px patches instead: the patches that cover it, at most 1536 (a larger image is shrunk
to fit). Their published `detail` rule is not known, so `detail` is ignored for them.
The per-model multipliers OpenAI bills on top (and gpt-4o-mini's 2833+5667) are prices,
not context: they are left out.

Sizes are read from a data URL's header (PNG, GIF, WEBP, JPEG); a remote URL's size is
unknown, so the largest possible cost is assumed: a budget computed from it can be too
strict, never too loose.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Callable, Mapping
from typing import Literal

import orjson

from policies.models import bare_name

LOW_DETAIL = 85
PER_TILE = 170
TILE = 512
FIT = 2048
SHORT_SIDE = 768
MAX_IMAGE_TOKENS = LOW_DETAIL + PER_TILE * 2 * 4
"""Short side <= 768 and long side <= 2048 give at most 2 x 4 tiles."""

PATCH = 32
MAX_PATCHES = 1536
PATCH_MODELS = ("gpt-4.1-mini", "gpt-4.1-nano", "o4-mini", "gpt-5-mini", "gpt-5-nano")
"""Model families OpenAI documents with the patch formula."""
ImagePricing = Literal["tiles", "patches"]

AUDIO_TOKENS_PER_SECOND = 10
COMPRESSED_AUDIO_BYTES_PER_SECOND = 8_000
"""64 kbit/s, the low end for speech: a duration guessed from it errs long, not short."""
OPAQUE_TOKENIZE_LIMIT = 8_192
OPAQUE_BYTES_PER_TOKEN = 4

_HEAD_CHARS = 4_096
_SCAN_CHARS = 1 << 20
"""A JPEG's frame header can sit behind large EXIF or ICC segments."""
_JPEG_FRAMES = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD9)})


def pricing_for(model: str) -> ImagePricing:
    """How this model counts an image's tokens."""
    return "patches" if bare_name(model).startswith(PATCH_MODELS) else "tiles"


def image_part_tokens(image_url: object, pricing: ImagePricing = "tiles") -> int:
    """Tokens for the value of an `image_url` part (an object, or a bare URL string)."""
    url: object
    detail: object
    if isinstance(image_url, str):
        url, detail = image_url, None
    elif isinstance(image_url, Mapping):
        url, detail = image_url.get("url"), image_url.get("detail")
    else:
        url, detail = None, None
    size = data_url_size(url) if isinstance(url, str) else None
    if pricing == "patches":
        return patch_tokens(*size) if size else MAX_PATCHES
    if detail == "low":
        return LOW_DETAIL
    return tile_tokens(*size) if size else MAX_IMAGE_TOKENS


def patch_tokens(width: int, height: int) -> int:
    """Tokens for an image of this size under the patch formula."""
    if width <= 0 or height <= 0:
        return MAX_PATCHES
    patches = _cover(width) * _cover(height)
    if patches <= MAX_PATCHES:
        return patches
    # Shrink to fit MAX_PATCHES, then a little more so one side fills whole patches.
    r = math.sqrt(PATCH * PATCH * MAX_PATCHES / (width * height))
    w, h = width * r / PATCH, height * r / PATCH
    r *= min(math.floor(w) / w, math.floor(h) / h)
    return min(MAX_PATCHES, _cover(width * r) * _cover(height * r))


def _cover(pixels: float) -> int:
    # Float rounding must not add a patch where the shrinking made a side exact.
    return max(1, math.ceil(pixels / PATCH - 1e-9))


def tile_tokens(width: int, height: int) -> int:
    """High-detail tokens for an image of this size."""
    if width <= 0 or height <= 0:
        return MAX_IMAGE_TOKENS
    short, long = sorted((width, height))
    if long > FIT:
        short, long = max(1, short * FIT // long), FIT
    if short > SHORT_SIDE:
        short, long = SHORT_SIDE, long * SHORT_SIDE // short
    return LOW_DETAIL + PER_TILE * math.ceil(short / TILE) * math.ceil(long / TILE)


def data_url_size(url: str) -> tuple[int, int] | None:
    """(width, height) from the header of a base64 PNG, GIF, WEBP or JPEG data URL."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",", 0, 256)
    if comma < 0 or not url[:comma].lower().endswith(";base64"):
        return None
    head = _b64_prefix(url, comma + 1, _HEAD_CHARS)
    size = _png(head) or _gif(head) or _webp(head) or _jpeg(head)
    if size is None and head[:2] == b"\xff\xd8" and len(url) - comma > _HEAD_CHARS:
        size = _jpeg(_b64_prefix(url, comma + 1, _SCAN_CHARS))
    return size


def audio_part_tokens(audio: object) -> int:
    """Tokens for an `input_audio` part, from its duration (WAV header, else a bitrate)."""
    if not isinstance(audio, Mapping) or not isinstance(audio.get("data"), str):
        return 0
    data: str = audio["data"]
    size = len(data) * 3 // 4 - data[-2:].count("=")
    rate = _wav_byte_rate(_b64_prefix(data, 0, 64)) if audio.get("format") == "wav" else None
    seconds = size / (rate or COMPRESSED_AUDIO_BYTES_PER_SECOND)
    return max(1, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND))


def opaque_part_tokens(part: Mapping[str, object], count: Callable[[str], int]) -> int:
    """Tokens for a part of a type with no published price (files, future types).

    Small parts are tokenized as JSON. A large one is almost surely a base64 payload:
    tokenizing megabytes would be slow and mean nothing, so it is priced by size, which
    keeps a big attachment visible to the budget.
    """
    try:
        text = orjson.dumps(part).decode()
    except TypeError:
        text = repr(part)
    if len(text) <= OPAQUE_TOKENIZE_LIMIT:
        return count(text)
    return math.ceil(len(text) / OPAQUE_BYTES_PER_TOKEN)


def _b64_prefix(text: str, start: int, chars: int) -> bytes:
    chunk = text[start : start + chars]
    if any(ws in chunk for ws in " \t\r\n"):  # some encoders wrap base64 lines
        chunk = "".join(chunk.split())
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        return base64.b64decode(chunk)
    except (binascii.Error, ValueError):
        return b""


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


def _png(b: bytes) -> tuple[int, int] | None:
    if b[:8] != b"\x89PNG\r\n\x1a\n" or len(b) < 24:
        return None
    w, h = struct.unpack(">II", b[16:24])
    return _positive(w, h)


def _gif(b: bytes) -> tuple[int, int] | None:
    if b[:6] not in (b"GIF87a", b"GIF89a") or len(b) < 10:
        return None
    w, h = struct.unpack("<HH", b[6:10])
    return _positive(w, h)


def _webp(b: bytes) -> tuple[int, int] | None:
    if b[:4] != b"RIFF" or b[8:12] != b"WEBP":
        return None
    kind = b[12:16]
    if kind == b"VP8X" and len(b) >= 30:
        w, h = int.from_bytes(b[24:27], "little"), int.from_bytes(b[27:30], "little")
        return _positive(w + 1, h + 1)
    if kind == b"VP8L" and len(b) >= 25 and b[20] == 0x2F:
        bits = int.from_bytes(b[21:25], "little")
        return _positive(1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF))
    if kind == b"VP8 " and len(b) >= 30 and b[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", b[26:30])
        return _positive(w & 0x3FFF, h & 0x3FFF)
    return None


def _jpeg(b: bytes) -> tuple[int, int] | None:
    if b[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(b):
        if b[i] != 0xFF:
            return None
        marker = b[i + 1]
        if marker == 0xFF:  # fill byte before a marker
            i += 1
            continue
        if marker in _JPEG_STANDALONE:
            i += 2
            continue
        if marker in _JPEG_FRAMES:
            if i + 9 > len(b):
                return None
            h, w = struct.unpack(">HH", b[i + 5 : i + 9])
            return _positive(w, h)
        if marker == 0xDA:  # start of scan: no frame header came first
            return None
        i += 2 + int.from_bytes(b[i + 2 : i + 4], "big")
    return None


def _wav_byte_rate(b: bytes) -> int | None:
    if b[:4] != b"RIFF" or b[8:12] != b"WAVE" or b[12:16] != b"fmt " or len(b) < 32:
        return None
    rate = int.from_bytes(b[28:32], "little")
    return rate or None
