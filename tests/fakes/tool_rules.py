"""Each provider's rule for function calls and their results, as its API
documents and enforces it, on the provider's own wire shape. The fakes
refuse a request breaking it with the provider's real error (status 400,
its error JSON), so a test fails where the provider would; the property
tests check built requests against all three.

- Anthropic (Messages): consecutive messages of one role are combined into
  one turn; every ``tool_use`` of an assistant turn is answered by a
  ``tool_result`` in the NEXT (user) turn, those results come first in it,
  and a ``tool_result`` answers only a ``tool_use`` of the turn before.
- OpenAI (Chat Completions): an assistant message with ``tool_calls`` is
  followed, before any other message, by a ``tool`` message for every id; a
  ``tool`` message answers only a call of that assistant message.
- Gemini: the function responses to a model content's calls follow it,
  before the next model content, one per call; a function response answers
  only a call of the model content before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

JSON = dict[str, Any]

ANTHROPIC_UNANSWERED = "`tool_use` ids were found without `tool_result` blocks immediately after"
OPENAI_UNANSWERED = "An assistant message with 'tool_calls' must be followed by tool messages"
GEMINI_UNANSWERED = "Please ensure that function response turn comes immediately after a function call turn."


def _blocks(message: JSON) -> list[JSON]:
    content = message.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return [{"type": "text", "text": content}] if content else []


def anthropic_violation(messages: Sequence[JSON]) -> str | None:
    """The error message Anthropic answers ``messages`` with, or None."""
    turns: list[tuple[str, list[JSON]]] = []
    for m in messages:
        if turns and turns[-1][0] == m.get("role"):
            turns[-1][1].extend(_blocks(m))
        else:
            turns.append((str(m.get("role")), _blocks(m)))
    for n, (role, blocks) in enumerate(turns):
        uses = [b.get("id", "") for b in blocks if b.get("type") == "tool_use"]
        results = [b.get("tool_use_id", "") for b in blocks if b.get("type") == "tool_result"]
        if role == "assistant" and results:
            return f"messages.{n}: `tool_result` blocks can only be in `user` messages"
        if role == "user" and uses:
            return f"messages.{n}: `tool_use` blocks can only be in `assistant` messages"
        before = turns[n - 1] if n else ("", [])
        asked = {b.get("id", "") for b in before[1] if b.get("type") == "tool_use"} if before[0] == "assistant" else set()
        stray = [r for r in results if r not in asked]
        if stray:
            return (f"messages.{n}.content: unexpected `tool_use_id` found in `tool_result` blocks: {stray[0]}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")
        kinds = [b.get("type") == "tool_result" for b in blocks]
        if any(kinds) and kinds != sorted(kinds, reverse=True):
            return f"messages.{n}.content: `tool_result` blocks must come first in the content"
        if uses:
            after = turns[n + 1][1] if n + 1 < len(turns) else []
            answered = {b.get("tool_use_id") for b in after if b.get("type") == "tool_result"}
            missing = [u for u in uses if u not in answered]
            if missing:
                return (f"messages.{n + 1}: {ANTHROPIC_UNANSWERED}: {', '.join(missing)}. Each `tool_use` block "
                        "must have a corresponding `tool_result` block in the next message.")
    return None


def openai_violation(messages: Sequence[JSON]) -> tuple[str, str] | None:
    """(message, param) of the error OpenAI answers ``messages`` with, or None."""
    asked: set[str] = set()
    for n, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in asked:
                return ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                        "with 'tool_calls'.", f"messages.[{n}].role")
            asked.discard(m["tool_call_id"])
            continue
        if asked:
            return (f"{OPENAI_UNANSWERED} responding to each 'tool_call_id'. The following tool_call_ids did not "
                    f"have response messages: {', '.join(sorted(asked))}", f"messages.[{n}].role")
        asked = {tc.get("id", "") for tc in m.get("tool_calls") or []} if role == "assistant" else set()
    if asked:
        return (f"{OPENAI_UNANSWERED} responding to each 'tool_call_id'. The following tool_call_ids did not "
                f"have response messages: {', '.join(sorted(asked))}", "messages")
    return None


def _key(f: JSON) -> str:
    return f.get("id") or "\0" + str(f.get("name", ""))


def gemini_violation(contents: Iterable[JSON]) -> str | None:
    """The error message Gemini answers ``contents`` with, or None."""
    open_calls: list[str] = []
    for content in contents:
        parts = content.get("parts") or []
        calls = [_key(p["functionCall"]) for p in parts if "functionCall" in p]
        responses = [_key(p["functionResponse"]) for p in parts if "functionResponse" in p]
        if content.get("role") == "model":
            if open_calls or responses:
                return GEMINI_UNANSWERED
            open_calls = calls
            continue
        for r in responses:
            if r not in open_calls:
                return GEMINI_UNANSWERED
            open_calls.remove(r)
    return GEMINI_UNANSWERED if open_calls else None
