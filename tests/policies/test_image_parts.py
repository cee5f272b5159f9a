"""policies/image_parts.py: Responses images of unknown size count as the largest image
of their detail (issue U item 8: by file id they counted as their small JSON)."""

from __future__ import annotations

from typing import Any

from policies.image_parts import holds_guessed_images
from policies.images import LOW_DETAIL, MAX_IMAGE_TOKENS, MAX_PATCHES
from policies.tokens import TokenCounter

BY_FILE = {"type": "input_image", "file_id": "file-abc123", "detail": "auto"}
SCREENSHOT = {
    "type": "computer_call_output",
    "call_id": "call_1",
    "output": {"type": "computer_screenshot", "file_id": "file-shot"},
}


def _tokens(part: dict[str, Any], model: str = "gpt-4o") -> int:
    counter = TokenCounter()
    with_part = counter.count_message({"role": "user", "content": [part]}, model)
    return with_part - counter.count_message({"role": "user", "content": []}, model)


def test_an_image_by_file_id_counts_as_the_largest_image_of_its_detail() -> None:
    assert _tokens(BY_FILE) == MAX_IMAGE_TOKENS
    assert _tokens({**BY_FILE, "detail": "low"}) == LOW_DETAIL
    assert _tokens(BY_FILE, "gpt-4.1-mini") == MAX_PATCHES


def test_a_screenshot_output_counts_its_image_and_its_other_fields() -> None:
    tokens = _tokens(SCREENSHOT)
    assert MAX_IMAGE_TOKENS < tokens < MAX_IMAGE_TOKENS + 60
    low = {**SCREENSHOT, "output": {**SCREENSHOT["output"], "detail": "low"}}  # type: ignore[dict-item]
    assert _tokens(low) < LOW_DETAIL + 60


PNG = (  # 1x1
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_a_sized_data_url_is_still_priced_by_its_size() -> None:
    # one tile (85 + 170), not the largest image
    assert _tokens({"type": "input_image", "image_url": PNG}) == 85 + 170


def test_images_of_a_guessed_size_are_found_for_the_overflow_rescue() -> None:
    def user(*parts: object) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "text", "text": "look"}, *parts]}

    remote = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    for guessed in (BY_FILE, SCREENSHOT, remote, {"type": "image_url", "image_url": "x.png"}):
        assert holds_guessed_images([{"role": "system", "content": "s"}, user(guessed)])
    sized = {"type": "image_url", "image_url": {"url": PNG}}
    for known in (sized, {"type": "input_image", "image_url": PNG}, {"type": "text"}, "bare"):
        assert not holds_guessed_images([user(known), {"role": "user", "content": "text"}])
