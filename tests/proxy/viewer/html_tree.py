"""Reading rendered pages as a user would: elements with their attributes and visible text,
through the standard library's HTML parser (entities decoded, so a test can compare plain
strings and still see that hostile text stayed text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset({"meta", "link", "input", "br", "img", "hr"})


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[Element] = []
        self._open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.found.append(element)
        if tag not in VOID:
            self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self._open) - 1, -1, -1):
            if self._open[depth].tag == tag:
                del self._open[depth:]
                return

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.parts.append(data)


def elements(html: str | bytes, tag: str | None = None, **attrs: str) -> list[Element]:
    """Every element (with `tag`, and the given attribute values), in document order."""
    collector = _Collector()
    collector.feed(html.decode() if isinstance(html, bytes) else html)
    collector.close()
    return [
        e
        for e in collector.found
        if (tag is None or e.tag == tag)
        and all(e.attrs.get(name.rstrip("_").replace("_", "-")) == v for name, v in attrs.items())
    ]


def one(html: str | bytes, tag: str, **attrs: str) -> Element:
    found = elements(html, tag, **attrs)
    assert len(found) == 1, f"expected one <{tag} {attrs}>, found {len(found)}"
    return found[0]


def text(html: str | bytes) -> str:
    """The page's visible text, whitespace collapsed."""
    collector = _Collector()
    root = Element("root", {})
    collector._open.append(root)
    collector.feed(html.decode() if isinstance(html, bytes) else html)
    collector.close()
    return " ".join(root.text.split())
