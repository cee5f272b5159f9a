from __future__ import annotations

import base64
import math
import struct
import zlib

import orjson
import pytest

from policies.images import (
    AUDIO_TOKENS_PER_SECOND,
    COMPRESSED_AUDIO_BYTES_PER_SECOND,
    LOW_DETAIL,
    MAX_IMAGE_TOKENS,
    MAX_PATCHES,
    OPAQUE_BYTES_PER_TOKEN,
    audio_part_tokens,
    data_url_size,
    image_part_tokens,
    opaque_part_tokens,
    patch_tokens,
    pricing_for,
    tile_tokens,
)


def png(width: int, height: int) -> bytes:
    """A valid 1-bit grayscale PNG, small even at 2048x4096."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    rows = (b"\0" + bytes((width + 7) // 8)) * height
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    """Header, logical screen, one image descriptor and a minimal LZW block."""
    screen = struct.pack("<HHBBB", width, height, 0, 0, 0)
    image = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0)
    return b"GIF89a" + screen + image + b"\x02\x02\x44\x01\x00" + b"\x3b"


def _segment(marker: int, payload: bytes) -> bytes:
    return bytes((0xFF, marker)) + struct.pack(">H", len(payload) + 2) + payload


def jpeg(width: int, height: int, *, exif: int = 0, frame: int = 0xC0, fill: bool = False) -> bytes:
    """SOI, JFIF, an optional EXIF segment of `exif` bytes, a quantization table, a frame."""
    out = b"\xff\xd8" + _segment(0xE0, b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0")
    if exif:
        out += _segment(0xE1, b"Exif\0\0" + bytes(exif))
    out += _segment(0xDB, bytes(range(65)))
    out += b"\xff" if fill else b""
    out += _segment(frame, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00")
    return out + _segment(0xDA, b"\x01\x01\x00\x00\x3f\x00") + b"\xff\xd9"


def _riff(kind: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + kind + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_vp8x(width: int, height: int) -> bytes:
    size = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return _riff(b"VP8X", b"\0\0\0\0" + size)


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | (height - 1) << 14
    return _riff(b"VP8L", b"\x2f" + bits.to_bytes(4, "little") + b"\0")


def webp_vp8(width: int, height: int) -> bytes:
    return _riff(b"VP8 ", b"\0\0\0\x9d\x01\x2a" + struct.pack("<HH", width, height))


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64," + base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (1024, 1024, 765),  # OpenAI's example: scaled to 768x768, 4 tiles
        (2048, 4096, 1105),  # OpenAI's example: 1024x2048, then 768x1536, 6 tiles
        (4096, 8192, 1105),
        (1920, 1080, 1105),  # 1365x768: 3x2 tiles
        (512, 512, 255),  # one tile, no scaling
        (513, 513, 765),  # under 768: not scaled, so 2x2 tiles
        (100, 100, 255),  # small images are never enlarged
        (768, 2048, MAX_IMAGE_TOKENS),
        (30, 5000, 85 + 170 * 4),
    ],
)
def test_tile_formula(width: int, height: int, tokens: int) -> None:
    assert tile_tokens(width, height) == tokens
    assert tile_tokens(height, width) == tokens


def test_max_image_tokens_is_the_largest_tile_count() -> None:
    sizes = [(w, h) for w in range(64, 4097, 64) for h in range(64, 4097, 192)]
    assert max(tile_tokens(w, h) for w, h in sizes) == MAX_IMAGE_TOKENS == 1445


@pytest.mark.parametrize("detail", ["high", "auto", None])
def test_high_and_auto_detail_use_the_tile_formula(detail: str | None) -> None:
    part = {"url": data_url(png(1024, 1024))} | ({"detail": detail} if detail else {})
    assert image_part_tokens(part) == 765


def test_low_detail_is_flat() -> None:
    assert image_part_tokens({"url": data_url(png(4096, 4096)), "detail": "low"}) == LOW_DETAIL
    assert image_part_tokens({"url": "https://example.com/a.png", "detail": "low"}) == 85


@pytest.mark.parametrize(
    ("image", "media"),
    [
        (png(1920, 1080), "image/png"),
        (gif(1920, 1080), "image/gif"),
        (jpeg(1920, 1080), "image/jpeg"),
        (jpeg(1920, 1080, frame=0xC2), "image/jpeg"),  # progressive
        (jpeg(1920, 1080, fill=True), "image/jpeg"),  # a fill byte before the frame marker
        (webp_vp8x(1920, 1080), "image/webp"),
        (webp_vp8l(1920, 1080), "image/webp"),
        (webp_vp8(1920, 1080), "image/webp"),
    ],
)
def test_sizes_are_read_from_each_format_header(image: bytes, media: str) -> None:
    url = data_url(image, media)
    assert data_url_size(url) == (1920, 1080)
    assert image_part_tokens({"url": url, "detail": "high"}) == 1105


def test_jpeg_frame_behind_a_large_exif_segment_is_found() -> None:
    url = data_url(jpeg(640, 480, exif=60_000), "image/jpeg")
    assert data_url_size(url) == (640, 480)
    assert image_part_tokens({"url": url}) == 85 + 170 * 2 * 1


def test_base64_wrapped_in_lines_and_upper_case_marker() -> None:
    raw = base64.encodebytes(png(300, 200)).decode()  # 76-column lines
    assert "\n" in raw
    assert data_url_size("data:image/png;BASE64," + raw) == (300, 200)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/cat.png",
        "data:image/png;base64,!!!!not base64!!!!",
        "data:image/svg+xml;utf8,<svg width='10' height='10'/>",
        data_url(png(1024, 1024)[:20]),  # truncated before the size
        data_url(png(0, 10)),
        data_url(b"BM" + bytes(60), "image/bmp"),
        data_url(jpeg(10, 10)[:25] + _segment(0xDA, b"\0\0"), "image/jpeg"),  # scan, no frame
        "data:image/png;base64,",
    ],
)
def test_unknown_sizes_assume_the_largest_cost(url: str) -> None:
    assert data_url_size(url) is None
    assert image_part_tokens({"url": url, "detail": "auto"}) == MAX_IMAGE_TOKENS


def test_odd_image_url_values() -> None:
    assert image_part_tokens(data_url(png(512, 512))) == 255  # a bare string
    assert image_part_tokens(None) == MAX_IMAGE_TOKENS
    assert image_part_tokens({"detail": "high"}) == MAX_IMAGE_TOKENS
    assert image_part_tokens({"url": 42}) == MAX_IMAGE_TOKENS


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (1024, 1024, 1024),  # OpenAI's example: 32 x 32 patches
        (1800, 2400, 1452),  # OpenAI's example: shrunk to 1056 x 1408, 33 x 44 patches
        (512, 512, 256),
        (100, 33, 4 * 2),  # partial patches count whole
        (1, 1, 1),
        (40_000, 40_000, 39 * 39),  # sqrt(1536) = 39.2 patches a side, floored
    ],
)
def test_patch_formula(width: int, height: int, tokens: int) -> None:
    assert patch_tokens(width, height) == tokens


def test_patch_models_and_tile_models() -> None:
    for model in ("gpt-4.1-mini", "gpt-4.1-nano-2025-04-14", "o4-mini", "openai/gpt-5-mini"):
        assert pricing_for(model) == "patches"
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "gpt-5", "llama-3"):
        assert pricing_for(model) == "tiles"


def test_patch_models_ignore_detail_and_assume_the_most_for_unknown_sizes() -> None:
    big = data_url(png(1024, 1024))
    assert image_part_tokens({"url": big, "detail": "low"}, "patches") == 1024
    assert image_part_tokens({"url": "https://example.com/a.png"}, "patches") == MAX_PATCHES
    assert image_part_tokens(7, "patches") == MAX_PATCHES
    assert MAX_PATCHES > MAX_IMAGE_TOKENS


def wav(seconds: float, byte_rate: int = 32_000) -> bytes:
    data = bytes(int(seconds * byte_rate))
    fmt = struct.pack("<HHIIHH", 1, 1, byte_rate // 2, byte_rate, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_wav_audio_is_priced_by_its_duration() -> None:
    audio = wav(2.0)
    expected = math.ceil(len(audio) / 32_000 * AUDIO_TOKENS_PER_SECOND)
    assert expected == 21  # 2 s of samples plus a 44-byte header
    part = {"data": base64.b64encode(audio).decode(), "format": "wav"}
    assert audio_part_tokens(part) == expected


def test_compressed_audio_assumes_a_low_bitrate() -> None:
    payload = base64.b64encode(bytes(2 * COMPRESSED_AUDIO_BYTES_PER_SECOND)).decode()
    assert payload.endswith("=")  # padding must not count as audio
    assert audio_part_tokens({"data": payload, "format": "mp3"}) == 2 * AUDIO_TOKENS_PER_SECOND
    # A "wav" without a readable header falls back to the same rate.
    assert audio_part_tokens({"data": payload, "format": "wav"}) == 20


def test_audio_without_data_costs_nothing_and_tiny_audio_costs_one() -> None:
    assert audio_part_tokens(None) == 0
    assert audio_part_tokens({"format": "wav"}) == 0
    assert audio_part_tokens({"data": "AAAA", "format": "mp3"}) == 1


def test_small_opaque_parts_are_tokenized_as_json() -> None:
    part = {"type": "file", "file": {"file_id": "file-abc123"}}
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return 7

    assert opaque_part_tokens(part, count) == 7
    assert seen == [orjson.dumps(part).decode()]


def test_large_opaque_parts_are_priced_by_size_without_tokenizing() -> None:
    blob = base64.b64encode(bytes(300_000)).decode()
    part = {"type": "file", "file": {"filename": "a.pdf", "file_data": blob}}

    def count(_text: str) -> int:
        raise AssertionError("a 400 KB payload must not be tokenized")

    size = len(orjson.dumps(part))
    assert opaque_part_tokens(part, count) == math.ceil(size / OPAQUE_BYTES_PER_TOKEN)
