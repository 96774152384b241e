"""The model compactor's transcript walks the Part kind table; its output
is the one the if-chain over the kinds gave (kept here as the reference)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentctx_common import part_kinds
from context_service.compaction import model_compactor
from context_service.compaction.model_compactor import render_transcript
from context_service.domain import model as m
from tests.support.domain_contents import content

_ROLE_LABEL = {"user": "User", "model": "Assistant"}


def if_chain_transcript(events: tuple[m.Event, ...]) -> str:
    """render_transcript as it was before the kind table (7e4db00)."""
    lines = []
    for e in events:
        if e.content is None:
            continue
        label = _ROLE_LABEL.get(e.content.role, e.content.role)
        for p in e.content.parts:
            if p.thought:
                continue
            if p.text is not None:
                lines.append(f"[{label}] {p.text}")
            elif p.function_call is not None:
                args = json.dumps(p.function_call.args, ensure_ascii=False, sort_keys=True)
                lines.append(f"[{label} calls tool {p.function_call.name}] {args}")
            elif p.function_response is not None:
                result = json.dumps(p.function_response.response, ensure_ascii=False, sort_keys=True)
                lines.append(f"[Tool {p.function_response.name} result] {result}")
            elif p.file_data is not None:
                lines.append(f"[{label} file] {p.file_data.file_uri}")
    return "\n".join(lines)


def _event(i: int, c: m.Content | None) -> m.Event:
    return m.Event(id=f"e{i}", sequence=i + 1, author="a", content=c)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), content), max_size=6))
def test_transcript_matches_the_if_chain(contents: list[m.Content | None]) -> None:
    events = tuple(_event(i, c) for i, c in enumerate(contents))
    assert render_transcript(events) == if_chain_transcript(events)


def test_every_kind_has_a_rendering() -> None:
    assert len(model_compactor._RENDER) == len(part_kinds.KINDS)


def test_pinned_transcript() -> None:
    c = m.Content(
        "model",
        (
            m.Part(text="hi"),
            m.Part(text="hidden", thought=True),
            m.Part(inline_data=m.Blob("image/png", b"\x89PNG")),
            m.Part(file_data=m.FileData("application/pdf", "gs://b/a.pdf")),
            m.Part(function_call=m.FunctionCall("c1", "read_file", {"path": "ä.py", "n": 2})),
        ),
    )
    r = m.Content("user", (m.Part(function_response=m.FunctionResponse("c1", "read_file", {"ok": True})),))
    assert render_transcript((_event(0, c), _event(1, None), _event(2, r))) == (
        "[Assistant] hi\n"
        "[Assistant file] gs://b/a.pdf\n"
        '[Assistant calls tool read_file] {"n": 2, "path": "ä.py"}\n'
        '[Tool read_file result] {"ok": true}'
    )
