"""Responses input items as agentctx events, and back.

Each item the SDK hands a session becomes one event. The item's exact JSON
(its keys in the order the SDK wrote them) rides in the event's
``custom_metadata["openai_agents"]["item"]``, so ``get_items`` returns the
same bytes whatever the item's type. Besides, items a model can read get
agentctx content, so that BuildContext, Generate and compaction see the
conversation: messages as text (images and files by URL where they have
one), function calls as ``function_call`` parts, their outputs as
``function_response`` parts. Every other item (reasoning, hosted tool
calls, references) is stored without content: listed, never sent to a
model by agentctx.

``pop_item`` is a retraction, never a delete: an event without content
whose ``retracts_event_id`` names the event it takes back, which the
context service's builds and compaction honour as ``replay`` does here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentctx_client import Content, Event, FunctionCall, FunctionResponse, Part

KEY = "openai_agents"
ITEM = "item"
USER = "user"
ASSISTANT = "assistant"
_USER_ROLES = frozenset({"user", "system", "developer"})
_TEXT_KINDS = frozenset({"input_text", "output_text", "text", "refusal", "summary_text"})
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")


def dumps(item: Mapping[str, Any]) -> str:
    """The item's JSON, keys in the item's order. A value JSON cannot
    carry is a TypeError naming the item's type."""
    try:
        return json.dumps(item, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"session items must be JSON values: {item.get('type', 'message')} item: {e}") from e


def loads(text: str) -> Any:
    return json.loads(text)


@dataclass(frozen=True)
class Stored:
    """One live item: its event's id and sequence and its exact JSON."""

    event_id: str
    sequence: int
    item_json: str


def item_event(item: Mapping[str, Any], event_id: str, call_names: Mapping[str, str]) -> Event:
    """The event storing ``item``. ``call_names`` maps the call ids seen so
    far to their function names (a function_call_output has no name)."""
    content = _content(item, call_names)
    author = ASSISTANT if content is not None and content.role == "model" else _author(item)
    return Event(content=content, id=event_id, author=author,
                 custom_metadata={KEY: {ITEM: dumps(item)}})


def pop_event(popped: Stored) -> Event:
    """The retraction of ``popped``: its id is derived from the popped
    event's, so a retried pop is stored once."""
    return Event(content=None, id=f"{popped.event_id}.pop", author=USER, retracts_event_id=popped.event_id)


def replay(live: list[Stored], events: Iterable[Event]) -> None:
    """Applies ``events`` (in sequence order) to ``live``: items appended,
    retracted items removed. Other events are ignored."""
    for event in events:
        if event.retracts_event_id:
            retract(live, event.retracts_event_id)
            continue
        meta = (event.custom_metadata or {}).get(KEY)
        if isinstance(meta, dict):
            item = meta.get(ITEM)
            if isinstance(item, str):
                live.append(Stored(event.id, event.sequence, item))


def retract(live: list[Stored], event_id: str) -> None:
    for i in range(len(live) - 1, -1, -1):
        if live[i].event_id == event_id:
            del live[i]
            return


def call_names(items: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {str(i["call_id"]): str(i["name"]) for i in items
            if i.get("type") == "function_call" and "call_id" in i and "name" in i}


def is_user_message(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type", "message") == "message" and item.get("role") == "user"


def _author(item: Mapping[str, Any]) -> str:
    role = item.get("role")
    if role in _USER_ROLES or str(item.get("type", "")).endswith("_output"):
        return USER
    return ASSISTANT


def _content(item: Mapping[str, Any], names: Mapping[str, str]) -> Content | None:
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        parts = tuple(_message_parts(item.get("content")))
        if not parts:
            return None
        return Content("user" if role in _USER_ROLES else "model", parts)
    if kind == "function_call":
        name, call_id = item.get("name"), item.get("call_id")
        if not _valid_name(name) or not isinstance(call_id, str) or not call_id:
            return None
        return Content("model", (Part(function_call=FunctionCall(name=str(name), args=_args(item.get("arguments")),
                                                                 id=call_id)),))
    if kind == "function_call_output":
        call_id = item.get("call_id")
        name = names.get(call_id) if isinstance(call_id, str) else None
        if not _valid_name(name) or not isinstance(call_id, str) or not call_id:
            return None
        output = item.get("output")
        text = output if isinstance(output, str) else "".join(_message_texts(output))
        return Content("user", (Part(function_response=FunctionResponse(id=call_id, name=str(name),
                                                                        response={"output": text})),))
    return None


def _message_parts(content: Any) -> Iterable[Part]:
    for text in _message_texts(content):
        if text:
            yield Part(text=text)


def _message_texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, Sequence):
        return
    for piece in content:
        if not isinstance(piece, Mapping):
            continue
        kind = piece.get("type")
        if kind in _TEXT_KINDS:
            text = piece.get("text", piece.get("refusal"))
            if isinstance(text, str):
                yield text
        elif kind == "input_image":
            url = piece.get("image_url")
            yield f"[image: {url}]" if isinstance(url, str) and not url.startswith("data:") else "[image]"
        elif kind == "input_file" and isinstance(piece.get("filename"), str):
            yield f"[file: {piece['filename']}]"


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return {"arguments": arguments}
        if isinstance(value, dict):
            return value
    return {"arguments": arguments}


def _valid_name(name: Any) -> bool:
    return (isinstance(name, str) and 0 < len(name) <= 128 and (name[0].isalpha() or name[0] == "_")
            and set(name) <= _NAME_CHARS)
