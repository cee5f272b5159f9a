from __future__ import annotations

import pytest

from policies.urls import mask_urls, masked_url
from policies.validate import describe


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://user:pw-123@host:8080/v1", "http://***@host:8080/v1"),
        ("https://tok3n-value@github.com/org/repo", "https://***@github.com/org/repo"),
        ("redis://:pw-123@cache:6379/0", "redis://***@cache:6379/0"),
        (
            "https://h/v1?api-version=2024-06-01&key=k3y",
            "https://h/v1?api-version=2024-06-01&key=***",
        ),
        ("https://h/v1#frag-k3y", "https://h/v1#***"),
        ("http://[::1]:9/x", "http://[::1]:9/x"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock"),
        ("unix://:pw-123@/run/redis.sock", "<URL hidden>"),
        ("http://user:pw-123@host:port/v1", "<invalid URL>"),
    ],
)
def test_masked_url(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_mask_urls_in_text_and_in_config_errors() -> None:
    text = "got 'ftp://u:pw-123@h/x' and http://a:b-456@c/ too"
    assert mask_urls(text) == "got 'ftp://***@h/x' and http://***@c/ too"
    assert "pw-123" not in describe("https://user:pw-123" + "x" * 80 + "@host/v1")
