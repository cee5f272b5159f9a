"""INPUT for `curator simulate`, read liberally so that whatever a user has at hand works:

- one JSON value: a chat request (`{"model", "messages", ...}`), a Responses API request
  (`{"model", "input": [...], ...}`, its items seen as the curators see them), an audit
  record, an array of those, or a bare array of messages (one request);
- JSONL: one request or audit record per line, a conversation's successive requests
  (`curator audit export` output works as is). Blank lines are skipped.
An object is a request when it has a `messages` list, wraps one under `request` or `body`,
or is an audit record holding the client's messages under `original` (with its `model`, any
`tools`, the output limits the client asked for, and the window and encoding the proxy
resolved: what decides the budget, so the simulation curates as production did).
Audit records of summarizer calls are skipped: they are not client requests.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from policies.messages import Message
from proxy.protocols.responses.facts import budget_body
from proxy.protocols.responses.items import to_neutral

Body = dict[str, Any]
OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
"""Audit record fields that go back into the request body (they decide the reserve)."""


class SimulateError(Exception):
    """A problem with the input or the command line: one line on stderr, exit status 1."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request of the input: its line, and the chat request body it stands for."""

    line: int
    body: Body
    context_window: int | None = None
    """The window the proxy resolved for this request (audit records), else None."""
    encoding: str | None = None

    @property
    def model(self) -> str:
        return str(self.body.get("model") or "")

    @property
    def messages(self) -> list[Message]:
        messages: list[Message] = self.body["messages"]
        return messages

    @property
    def tools(self) -> list[Mapping[str, Any]]:
        tools = self.body.get("tools")
        return [t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []


def read_requests(path: str, text: str) -> list[Request]:
    """Parse INPUT (see the module docstring); errors name the file and the line."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise SimulateError(f"{path}: empty input; expected a chat request as JSON, or JSONL")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if _is_json(lines[first]):  # a complete value on the first line: JSONL
            return _read_jsonl(path, lines)
        raise SimulateError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if isinstance(value, list) and value and all(_is_message(m) for m in value):
        value = {"messages": value}
    if isinstance(value, list):
        found = [_request(item, f"{path}: [{i}]", first + 1) for i, item in enumerate(value)]
    else:
        found = [_request(value, path, first + 1)]
    return _nonempty(path, found)


def requests_of_records(where: str, records: Iterable[Mapping[str, Any]]) -> list[Request]:
    """Audit records read from a store, as requests (summarizer calls left out)."""
    return list(stream_records(where, records))


def stream_records(where: str, records: Iterable[Mapping[str, Any]]) -> Iterator[Request]:
    """`requests_of_records`, a record at a time."""
    found = (
        _request(dict(record), f"{where}: record {record.get('id')}", number)
        for number, record in enumerate(records, 1)
    )
    return _streamed(where, found)


def stream_requests(path: str) -> Iterator[Request]:
    """INPUT (a file, or "-" for stdin) as it is read: JSONL a line at a time (an agent's
    400 records exported are over a GB), one JSON value whole (`read_requests`)."""
    try:
        with _opened(path) as handle:
            head = _until_text(handle, [])
            one = len(head)
            if head and _is_object(head[-1]) and len(_until_text(handle, head)) > one:
                lines = enumerate(itertools.chain(head, handle), 1)
                yield from _streamed(path, (_line(path, n, text) for n, text in lines))
            else:  # one value, or one object alone (read as it always was)
                yield from read_requests(path, "".join(head) + handle.read())
    except OSError as exc:
        raise SimulateError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SimulateError(f"{path}: not UTF-8 text (byte {exc.start})") from None


@contextlib.contextmanager
def _opened(path: str) -> Iterator[TextIO]:
    if path == "-":
        yield sys.stdin
        return
    with open(path, encoding="utf-8") as handle:
        yield handle


def _until_text(handle: TextIO, head: list[str]) -> list[str]:
    """`head` and the lines read up to the next one that is not blank (or the end: then
    none, the blank ones left out, so a longer `head` means one more line of text)."""
    read: list[str] = []
    for line in handle:
        read.append(line)
        if line.strip():
            head += read
            break
    return head


def _is_object(line: str) -> bool:
    """A line holding a whole JSON object: JSONL (one value over many lines never is)."""
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _line(path: str, number: int, line: str) -> Request | bool | None:
    """One JSONL line's request; False for a blank line."""
    if not line.strip():
        return False
    try:
        item = json.loads(line.rstrip("\r\n"))  # a column past its end names its own line
    except json.JSONDecodeError as exc:
        where = f"{path}:{number}: invalid JSON (column {exc.colno})"
        raise SimulateError(f"{where}: {exc.msg}") from None
    return _request(item, f"{path}:{number}", number)


def _streamed(path: str, found: Iterable[Request | bool | None]) -> Iterator[Request]:
    """The requests; at the end, `_nonempty`'s complaint if there were none."""
    seen = False
    chat = False
    for request in found:
        if request is False:
            continue
        seen = True
        if isinstance(request, Request):
            chat = True
            yield request
    if not chat:
        _nonempty(path, [None] if seen else [])


def _read_jsonl(path: str, lines: Sequence[str]) -> list[Request]:
    found: list[Request | None] = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                where = f"{path}:{number}: invalid JSON (column {exc.colno})"
                raise SimulateError(f"{where}: {exc.msg}") from None
            found.append(_request(item, f"{path}:{number}", number))
    return _nonempty(path, found)


def _request(item: object, where: str, line: int) -> Request | None:
    """The request an input object stands for; None for a summarizer's audit record."""
    if not isinstance(item, dict):
        expected = "a chat request or an audit record (a JSON object)"
        raise SimulateError(f"{where}: expected {expected}, got {_json_kind(item)}")
    if item.get("kind") == "summarizer":
        return None
    inner = next((item[k] for k in ("request", "body") if isinstance(item.get(k), dict)), None)
    if inner is not None and not isinstance(item.get("messages"), list):
        return _request({"model": item.get("model"), **inner}, where, line)
    if isinstance(item.get("messages"), list):
        body = dict(item)
    elif isinstance(item.get("input"), list):
        body = _responses_body(item, where)
    elif isinstance(item.get("original"), list):
        return _recorded(item, where, line)
    else:
        raise SimulateError(
            f'{where}: expected a chat request with a "messages" list, a "request" object, '
            f'or an audit record with an "original" list; found keys: {", ".join(item) or "none"}'
        )
    for i, msg in enumerate(body["messages"]):
        if not _is_message(msg):
            got = _json_kind(msg)
            raise SimulateError(
                f'{where}: messages[{i}]: expected an object with a "role", got {got}'
            )
    return Request(line, body)


def _recorded(item: Mapping[str, Any], where: str, line: int) -> Request | None:
    """An audit record: the client's messages, tools and output limits, and the resolved
    window and encoding."""
    body: Body = {"model": item.get("model"), "messages": item["original"]}
    body.update({"tools": item["tools"]} if isinstance(item.get("tools"), list) else {})
    for key in OUTPUT_LIMITS:
        if _positive(item.get(key)):
            body[key] = item[key]
    request = _request(body, where, line)
    if request is None:
        return None
    window = item.get("context_window")
    encoding = item.get("encoding")
    return Request(
        line,
        request.body,
        window if _positive(window) else None,
        encoding if isinstance(encoding, str) and encoding else None,
    )


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _responses_body(item: Body, where: str) -> Body:
    """A Responses request as the chat body its curation works on (`proxy.protocols.responses`)."""
    mapped = to_neutral(item["input"], item.get("instructions"))
    if isinstance(mapped, str):
        raise SimulateError(f"{where}: a Responses request the proxy forwards uncurated: {mapped}")
    return {**budget_body(item), "messages": mapped.messages}


def _nonempty(path: str, found: Sequence[Request | None]) -> list[Request]:
    requests = [r for r in found if r is not None]
    if not found:
        raise SimulateError(f"{path}: holds no requests")
    if not requests:
        raise SimulateError(f"{path}: no chat requests (only audit records of summarizer calls)")
    return requests


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def _is_message(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return "null" if value is None else kinds.get(type(value), "a number")
