"""Writes docs/ERRORS.md's table of error reasons from the ErrorReason enum in
protos/agentctx/error/v1/error_reason.proto (between the error-reasons
markers), so every reason the services send is documented, with its code
and the metadata it carries.

Usage: python scripts/gen_error_table.py [--check]
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = ROOT / "protos" / "agentctx" / "error" / "v1" / "error_reason.proto"
TARGET = ROOT / "docs" / "ERRORS.md"  # the README links it
BEGIN, END = "<!-- error-reasons:begin (scripts/gen_error_table.py) -->", "<!-- error-reasons:end -->"


def table() -> str:
    rows = ["| code | reason | meaning | metadata |", "|---|---|---|---|"]
    values = re.findall(r"((?:  //[^\n]*\n)+)  ([A-Z_]+) = \d+(?: \[([^\]]*)\])?", PROTO.read_text())
    for comment, name, options in values:
        if name == "ERROR_REASON_UNSPECIFIED":
            continue
        text = " ".join(line.strip()[2:].strip() for line in comment.strip().splitlines())
        head, _, meaning = text.partition(": ")
        code, _, also = head.partition(" ")
        meaning = meaning[:1].upper() + meaning[1:]
        if also:
            meaning += f" ({also.strip()})"
        keys = ", ".join(f"`{k}`" for k in re.findall(r'"([a-z_]+)"', options or ""))
        rows.append(f"| {code} | `{name}` | {meaning} | {keys} |")
    return "\n".join(rows)


def render(document: str) -> str:
    start, end = document.index(BEGIN) + len(BEGIN), document.index(END)
    return document[:start] + "\n" + table() + "\n" + document[end:]


if __name__ == "__main__":
    current = TARGET.read_text()
    fresh = render(current)
    if "--check" in sys.argv:
        sys.exit(0 if fresh == current else "docs/ERRORS.md's error table is stale: run scripts/gen_error_table.py")
    TARGET.write_text(fresh)
