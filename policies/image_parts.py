"""Images the Responses API sends in shapes of its own: an `input_image` part the chat
mapping could not turn into an `image_url` (one given by `file_id`, or with no URL), a
`computer_screenshot`, and a `computer_call_output` item carrying one.

Their size is unknown (a file id names a picture the upstream has; a remote URL is not
fetched), so each is counted as the largest image of its detail (`policies.images`:
1445 tokens by the tile formula, 85 for `detail: low`, 1536 patches): a budget built on it
can be too strict, never too loose. Counted as their small JSON instead, a request of
screenshots by file id was 406 tokens by our count and 9,382 by the upstream's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from policies.images import ImagePricing, data_url_size, image_part_tokens, opaque_part_tokens

IMAGE_PART_TYPES = frozenset({"input_image", "computer_screenshot"})
SCREENSHOT_ITEM = "computer_call_output"


def is_image_part(part: Mapping[str, object]) -> bool:
    if _is_image(part):
        return True
    output = part.get("output")
    return part.get("type") == SCREENSHOT_ITEM and isinstance(output, Mapping) and _is_image(output)


def _is_image(part: Mapping[str, object]) -> bool:
    kind = part.get("type")  # any JSON value: a list is no type, and is unhashable
    return isinstance(kind, str) and kind in IMAGE_PART_TYPES


def image_tokens(
    part: Mapping[str, object], pricing: ImagePricing, count: Callable[[str], int]
) -> int:
    """Tokens of a part `is_image_part` accepts: the image, plus a screenshot item's other
    fields as JSON."""
    if _is_image(part):
        return _image(part, pricing)
    output = part.get("output")
    if not isinstance(output, Mapping):  # not one `is_image_part` accepts
        return opaque_part_tokens(part, count)
    rest = {**part, "output": {k: v for k, v in output.items() if k != "image_url"}}
    return _image(output, pricing) + opaque_part_tokens(rest, count)


def _image(image: Mapping[str, object], pricing: ImagePricing) -> int:
    url = image.get("image_url")
    # A data URL's header gives the size; a file id or a remote URL gives none: the largest.
    return image_part_tokens(
        {"url": url if isinstance(url, str) else None, "detail": image.get("detail")}, pricing
    )


def holds_guessed_images(messages: Iterable[Mapping[str, object]]) -> bool:
    """Whether any of `messages` holds an image whose size was guessed, not read (a file
    id, a remote URL): its count may be far from the upstream's, which an overflow rescue
    must allow for (`proxy.curation.rescue`)."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(_guessed(part) for part in content):
            return True
    return False


def _guessed(part: object) -> bool:
    if not isinstance(part, Mapping):
        return False
    if part.get("type") == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
    elif is_image_part(part):
        image = part if _is_image(part) else part.get("output")
        url = image.get("image_url") if isinstance(image, Mapping) else None
    else:
        return False
    return not (isinstance(url, str) and data_url_size(url) is not None)
