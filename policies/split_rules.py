"""Split points: where a text's tokens are exactly those of the pieces it is cut into.

tiktoken pre-tokenizes with a regex and runs BPE within each piece. In the encodings
listed in `SPLITS`, the position `x` right after a newline is a piece boundary, whatever
comes before or after it, when a visible character other than "/" follows (in o200k, also
when blanks that break no line and then a visible character follow). Letter, digit and
punctuation pieces hold no newline except trailing ones (punctuation may trail carriage returns,
newlines and, in o200k, slashes), and a whitespace piece holding a newline ends at the
last newline of its run. So for every `a < x <= b`:
`encode(text[a:b]) == encode(text[a:x]) + encode(text[x:b])`. (cl100k also has a
`\\s++$` branch, which at the very end of a text joins a newline to the spaces after it:
hence its stricter rule.) `tests/policies/test_splits.py` checks the rule on random texts
and next to a sample of all code points; a sweep of every code point passed once.
"""

from __future__ import annotations

import re
from types import MappingProxyType

# Python's \s is a superset of the encodings' (Unicode White_Space), so these patterns can
# only miss split points, never invent one.
_AFTER_NEWLINE = re.compile(r"\n(?=[^\s/]|[^\S\r\n]+\S)")
_BEFORE_VISIBLE = re.compile(r"\n(?=[^\s/])")
SPLITS = MappingProxyType(
    {"o200k_base": _AFTER_NEWLINE, "o200k_harmony": _AFTER_NEWLINE, "cl100k_base": _BEFORE_VISIBLE}
)
"""The split rule of each encoding whose pre-tokenizer it was checked against. Used by
`policies.splits.Profile` and by rs_bpe's encoder, which cuts long texts there
(`policies.fast_bpe`)."""
