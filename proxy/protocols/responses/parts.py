"""Content parts of Responses items <-> the chat-format parts the curators count and cut.

Text parts become chat `text` parts (curators may shorten those), refusals stay refusals,
images with a URL become `image_url` parts (priced by their tiles); anything else (files,
audio, images by file id, future kinds) stays the very same part, which the counter prices
by its size and no curator edits. A content that comes back changed is mapped onto the
shape the client sent: a string stays a string; text in a list reuses the client's first
text part as its template, so `annotations` and the like survive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.messages import MAPPING

TEXT_TYPES = ("input_text", "output_text")


def to_neutral_content(content: object) -> object:
    """A message's (or a tool output's) content as chat content: strings stay as they are,
    and so does the text of a list of one text part (chat prices and cuts a string the
    same way, faster; a changed string is written back into that part)."""
    if not isinstance(content, list):
        return content
    if len(content) == 1:
        part = content[0]
        if type(part) is dict and part.get("type") in TEXT_TYPES:
            text = part.get("text")
            if type(text) is str:
                return text
    return [_neutral_part(part) for part in content]


def _neutral_part(part: object) -> object:
    if not isinstance(part, MAPPING):
        return part
    kind = part.get("type")
    if kind in TEXT_TYPES and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "refusal", "refusal": part["refusal"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image: dict[str, Any] = {"url": part["image_url"]}
        if isinstance(part.get("detail"), str):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    return part


def from_neutral_content(
    new: object, original: object, neutral: object, role: str
) -> object | None:
    """The client-shaped content for a curated `new` content; None when it cannot be
    expressed in the client's shape (the caller then keeps the original item)."""
    if isinstance(new, str):
        if isinstance(original, str) or original is None:
            return new
        if isinstance(original, list):
            return [_text_part(new, original, role)]
        return None
    if not isinstance(new, list) or not isinstance(original, list):
        return None
    if not isinstance(neutral, list):
        # The client's one text part was its text here; a curator gave back text parts.
        texts = [p.get("text") for p in new if isinstance(p, MAPPING) and p.get("type") == "text"]
        if len(texts) != len(new) or not all(isinstance(t, str) for t in texts):
            return None
        return [_text_part("".join(texts), original, role)]  # type: ignore[arg-type]
    by_identity = {id(n): o for n, o in zip(neutral, original, strict=True)}
    out: list[object] = []
    for part in new:
        if id(part) in by_identity:
            out.append(by_identity[id(part)])
        elif isinstance(part, MAPPING) and part.get("type") == "text":
            out.append(_text_part(str(part.get("text", "")), original, role))
        else:
            return None
    return out


def _text_part(text: str, original: Sequence[object], role: str) -> Mapping[str, Any]:
    template = next(
        (p for p in original if isinstance(p, MAPPING) and p.get("type") in TEXT_TYPES), None
    )
    if template is not None:
        return {**template, "text": text}
    if role == "assistant":
        return {"type": "output_text", "text": text, "annotations": []}
    return {"type": "input_text", "text": text}
