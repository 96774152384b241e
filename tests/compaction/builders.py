"""Event builders and hypothesis strategies for compaction tests."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable

from hypothesis import strategies as st

from context_service.domain.model import Content, Event, FunctionCall, FunctionResponse, Part, Usage

T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def user(text: str, **kw) -> Event:
    kw.setdefault("id", "")
    return Event(author="user", content=Content("user", (Part(text=text),)), **kw)


def model(text: str = "", calls: Iterable[tuple[str, str]] = (), usage: Usage | None = None, **kw) -> Event:
    parts = ([Part(text=text)] if text else []) + [
        Part(function_call=FunctionCall(cid, name, {"path": f"src/{name}.py"})) for cid, name in calls
    ]
    kw.setdefault("id", "")
    return Event(author="model", content=Content("model", tuple(parts)), usage=usage, **kw)


def tool(call_id: str, name: str, result: str = "ok", **kw) -> Event:
    part = Part(function_response=FunctionResponse(call_id, name, {"result": result}))
    kw.setdefault("id", "")
    return Event(author="user", content=Content("user", (part,)), **kw)


def numbered(events: Iterable[Event], start: int = 1) -> list[Event]:
    """Events with ids e<seq>, sequences and times assigned."""
    out = []
    for seq, e in zip(itertools.count(start), events):
        out.append(
            Event(
                id=e.id or f"e{seq}",
                author=e.author,
                content=e.content,
                sequence=seq,
                partial=e.partial,
                usage=e.usage,
                create_time=T0 + dt.timedelta(seconds=seq),
                long_running_tool_ids=e.long_running_tool_ids,
            )
        )
    return out


# --- random conversations ---------------------------------------------------

_TEXT = st.text(alphabet="abcdefghij klmnop.", min_size=0, max_size=400)


@st.composite
def step(draw, counter: itertools.count) -> list[Event]:
    """One agent step: user input, a model reply, or a model tool round with
    any mix of answered, unanswered, long-running and orphan results."""
    kind = draw(st.sampled_from(["user", "model", "tools", "tools", "orphan_response", "partial"]))
    if kind == "user":
        return [user(draw(_TEXT) or "hi")]
    if kind == "model":
        return [model(draw(_TEXT) or "ok")]
    if kind == "partial":
        return [Event(id="", author="model", content=Content("model", (Part(text="chunk"),)), partial=True)]
    if kind == "orphan_response":
        return [tool(f"ghost{next(counter)}", "ghost", draw(_TEXT))]
    n = draw(st.integers(1, 3))
    calls = [(f"c{next(counter)}", draw(st.sampled_from(["read_file", "edit_file", "search"]))) for _ in range(n)]
    long_running = tuple(cid for cid, _ in calls if draw(st.booleans()) and draw(st.booleans()))
    out = [Event(id="", author="model", content=model("", calls).content, long_running_tool_ids=long_running)]
    for cid, name in calls:
        if draw(st.integers(0, 4)) > 0:  # mostly answered
            out.append(tool(cid, name, draw(_TEXT) * draw(st.integers(1, 20))))
    return out


@st.composite
def histories(draw, min_steps: int = 0, max_steps: int = 30) -> list[Event]:
    counter = itertools.count()
    steps = draw(st.lists(step(counter), min_size=min_steps, max_size=max_steps))
    return numbered(e for s in steps for e in s)
