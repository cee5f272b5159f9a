"""What an upstream response head must be before anything of it is relayed: a final status
(200-599) and headers uvicorn can send. Anything else is answered 502 `upstream_error`,
since once the head went out the client could only be dropped."""

from __future__ import annotations

import re
from collections.abc import Sequence


class UnsendableHeader(Exception):
    """A response header an HTTP/1.1 server must not send (control bytes, a bad name):
    answered 502 before anything is relayed, rather than failing mid-response."""

    safe_reason = "response header with bytes HTTP does not allow"


_BAD_NAME = re.compile(rb'[\x00-\x1f\x7f()<>@,;:\[\]={} \t\\"]')
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
"""What uvicorn refuses to send (it raises, and the client's connection drops)."""


def unsendable(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    # One search per side over the joined headers: the separators are allowed bytes.
    names = b"a".join(n for n, _ in headers)
    values = b"\t".join(v for _, v in headers)
    return _BAD_NAME.search(names) is not None or _BAD_VALUE.search(values) is not None


class NoFinalStatus(Exception):
    """A status HTTP gives no final meaning: 600-999 (uvicorn cannot send one: the client's
    connection dropped), or a 1xx such as 101 (relayed, it switched the client's connection
    to nothing). Answered 502 before anything is relayed."""

    safe_reason = "response status that is no final HTTP status"


FINAL_STATUSES = range(200, 600)
