"""Content parts of Responses items <-> chat-format parts, and a curated content written
back in the shape the client sent."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.protocols.responses.parts import from_neutral_content, to_neutral_content

TEXT = {"type": "input_text", "text": "What is this?"}
OUTPUT = {"type": "output_text", "text": "A cat.", "annotations": [{"type": "url_citation"}]}
IMAGE = {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "low"}
FILE = {"type": "input_file", "file_id": "file-1"}


def test_a_string_stays_a_string_and_one_text_part_becomes_its_text() -> None:
    assert to_neutral_content("plain") == "plain"
    assert to_neutral_content([TEXT]) == "What is this?"
    assert to_neutral_content([OUTPUT]) == "A cat."


def test_parts_map_to_chat_parts_and_unknown_ones_stay_the_same_object() -> None:
    mapped = to_neutral_content([TEXT, IMAGE, FILE, {"type": "refusal", "refusal": "No."}])
    assert isinstance(mapped, list)
    assert mapped[0] == {"type": "text", "text": "What is this?"}
    image = {"url": "https://example.com/cat.png", "detail": "low"}
    assert mapped[1] == {"type": "image_url", "image_url": image}
    assert mapped[2] is FILE
    assert mapped[3] == {"type": "refusal", "refusal": "No."}


def test_a_cut_string_goes_back_as_a_string_or_into_the_clients_text_part() -> None:
    assert from_neutral_content("short", "a long text", "a long text", "user") == "short"
    back = from_neutral_content("A c…", [OUTPUT], "A cat.", "assistant")
    assert back == [{**OUTPUT, "text": "A c…"}]  # annotations and all kept


def test_text_parts_for_a_single_part_content_are_joined_into_the_clients_part() -> None:
    new = [{"type": "text", "text": "A "}, {"type": "text", "text": "c…"}]
    assert from_neutral_content(new, [OUTPUT], "A cat.", "assistant") == [
        {**OUTPUT, "text": "A c…"}
    ]
    assert from_neutral_content([IMAGE], [OUTPUT], "A cat.", "assistant") is None


def test_unchanged_parts_go_back_as_the_clients_own_objects() -> None:
    original = [TEXT, IMAGE]
    neutral = to_neutral_content(original)
    assert isinstance(neutral, list)
    back = from_neutral_content(
        [{"type": "text", "text": "What?"}, neutral[1]], original, neutral, "user"
    )
    assert back == [{**TEXT, "text": "What?"}, IMAGE]
    assert back is not None
    assert back[1] is IMAGE


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("assistant", {"type": "output_text", "text": "x", "annotations": []}),
        ("user", {"type": "input_text", "text": "x"}),
    ],
)
def test_text_without_a_template_part_takes_the_roles_part_type(
    role: str, expected: dict[str, Any]
) -> None:
    assert from_neutral_content("x", [IMAGE], [IMAGE], role) == [expected]


def test_a_shape_the_client_did_not_use_cannot_be_written_back() -> None:
    assert (
        from_neutral_content([{"type": "text", "text": "x"}], "a string", "a string", "user")
        is None
    )
    assert from_neutral_content(42, [TEXT], "What is this?", "user") is None
