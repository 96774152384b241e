"""The characters a stored summary may hold.

A summary is prose for a model. Events may hold any text (a tool result
can carry NUL or terminal escapes), and a compactor may copy it into its
summary; rejecting such a summary would leave the session unable to
compact ever again. So control characters other than tab, line feed and
carriage return are replaced by U+FFFD instead: they carry nothing for the
reader and some consumers stop at NUL (C strings, PostgreSQL text). Every
other character of any plane is kept.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character but tab, LF and CR replaced;
    idempotent, and unchanged (the same object) when there is none."""
    return _CONTROL.sub(REPLACEMENT, text) if _CONTROL.search(text) else text
