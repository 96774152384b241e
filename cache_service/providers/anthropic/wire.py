"""Canonical (Gemini-like JSON) requests as Messages API parameters, with
``cache_control`` breakpoints where a PrefixMark says, and messages and
stream events back (see anthropic.adapter)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from cache_service.domain.model import JSON, ModelCall, ModelReply, Usage
from cache_service.domain.ports import CacheRef, InvalidRequest, PrefixMark, UnsupportedField
from cache_service.providers.anthropic.settings import SHORT_TTL_S, one_sampler
from cache_service.providers.tool_ids import ToolIds

MAX_BREAKPOINTS = 4  # cache_control blocks a request may carry
LOOKBACK_BLOCKS = 20  # blocks a breakpoint looks back for a written prefix
_FINISH = {"end_turn": "STOP", "tool_use": "STOP", "stop_sequence": "STOP", "pause_turn": "STOP",
           "max_tokens": "MAX_TOKENS", "refusal": "SAFETY"}


def request_params(call: ModelCall, cache: CacheRef | None, default_max_tokens: int) -> dict[str, Any]:
    """The Messages API parameters of ``call``, with breakpoints where a
    PrefixMark says its leased prefix ends."""
    mark = cache if isinstance(cache, PrefixMark) and cache.history_len is not None else None
    tools = [_tool(f) for t in call.tools for f in t.get("functionDeclarations", ())]
    system = [{"type": "text", "text": p["text"]} for p in (call.system_instruction or {}).get("parts", ())
              if p.get("text")]
    messages = _messages(call.contents)
    if not messages:
        raise InvalidRequest("contents must not be empty", status=400)
    if mark is not None:
        control: JSON = {"type": "ephemeral"}
        if mark.ttl_s > SHORT_TTL_S:
            control["ttl"] = "1h"
        head = system[-1] if system else (tools[-1] if tools else None)
        if head is not None:
            head["cache_control"] = dict(control)
        ends = {min(mark.history_len or 0, len(call.contents))}
        if mark.write_through:
            ends.add(len(call.contents))
        ends |= bridges([len(m["content"]) for m in messages], [m["role"] == "assistant" for m in messages],
                        ends - {0}, MAX_BREAKPOINTS - len(ends - {0}) - (head is not None))
        for n in ends - {0}:
            # Canonical contents and messages correspond one to one.
            messages[n - 1]["content"][-1]["cache_control"] = dict(control)
    g = call.generation_config
    params: dict[str, Any] = {"model": call.model, "messages": messages,
                              "max_tokens": int(g.get("maxOutputTokens") or default_max_tokens)}
    if system:
        params["system"] = system
    if tools:
        params["tools"] = tools
        choice = _tool_choice(call.tool_config)
        if choice is not None:
            params["tool_choice"] = choice
    # This SDK no longer types the sampling parameters; older models still take them.
    sampling = {theirs: g[ours] for ours, theirs in (("temperature", "temperature"), ("topP", "top_p"),
                                                     ("topK", "top_k")) if g.get(ours) is not None}
    if "temperature" in sampling and "top_p" in sampling and one_sampler(call.model):
        raise UnsupportedField("generation_config.top_p",
                               f"{call.model} takes temperature or top_p, not both: set only one")
    if sampling:
        params["extra_body"] = sampling
    if g.get("stopSequences"):
        params["stop_sequences"] = list(g["stopSequences"])
    return params


def bridges(sizes: list[int], replies: list[bool], ends: set[int], room: int) -> set[int]:
    """Breakpoints (in contents) to add so that the previous request's end
    is still found: Anthropic looks for a written prefix only
    ``LOOKBACK_BLOCKS`` blocks back from each breakpoint. The previous
    request ended just before the last model content ahead of a breakpoint
    (a turn adds a reply and the next input); when more blocks than that
    (parallel tool calls and their results) separate the two, with no
    breakpoint between, one is placed there, as ``room`` allows. ``sizes``:
    each message's blocks; ``replies``: which are the model's."""
    added: set[int] = set()
    for n in sorted(ends):
        if len(added) >= room:
            break
        previous = next((i for i in range(n - 1, -1, -1) if replies[i]), None)
        if previous is None or previous == 0:
            continue
        between = ends | added
        if previous in between or any(previous < e < n for e in between):
            continue
        if sum(sizes[previous:n]) > LOOKBACK_BLOCKS:
            added.add(previous)
    return added


def _tool(f: JSON) -> JSON:
    out: JSON = {"name": f.get("name", ""),
                 "input_schema": json.loads(json.dumps(f["parameters"])) if f.get("parameters")
                 else {"type": "object", "properties": {}}}
    if f.get("description"):
        out["description"] = f["description"]
    return out


def _tool_choice(d: JSON | None) -> JSON | None:
    mode = (d or {}).get("mode")
    allowed = list((d or {}).get("allowedFunctionNames") or ())
    if mode == "NONE":
        return {"type": "none"}
    if mode == "ANY":
        return {"type": "tool", "name": allowed[0]} if len(allowed) == 1 else {"type": "any"}
    if mode in ("AUTO", "VALIDATED"):
        return {"type": "auto"}
    return None


def _messages(contents: tuple[JSON, ...]) -> list[JSON]:
    ids = ToolIds("toolu_agentctx_")
    out: list[JSON] = []
    for content in contents:
        role = "assistant" if content.get("role") == "model" else "user"
        blocks = [b for b in (_block(p, ids) for p in content.get("parts", ())) if b is not None]
        # Anthropic wants a user turn's tool results before anything else in it.
        blocks.sort(key=lambda b: b["type"] != "tool_result")
        if not blocks:
            # Every message needs a block: a content of thoughts only keeps its place.
            blocks = [{"type": "text", "text": "(no content)"}]
        out.append({"role": role, "content": blocks})
    return out


def _block(p: JSON, ids: ToolIds) -> JSON | None:
    if p.get("thought"):
        return None
    if "text" in p:
        return {"type": "text", "text": p["text"]} if p["text"] else None
    if "functionCall" in p:
        fc = p["functionCall"]
        return {"type": "tool_use", "id": ids.call(fc.get("name", ""), fc.get("id") or ""), "name": fc.get("name", ""),
                "input": json.loads(json.dumps(fc.get("args") or {}))}
    if "functionResponse" in p:
        fr = p["functionResponse"]
        return {"type": "tool_result", "tool_use_id": ids.response(fr.get("name", ""), fr.get("id") or ""),
                "content": json.dumps(fr.get("response") or {}, sort_keys=True)}
    if "inlineData" in p:
        mime = p["inlineData"].get("mimeType", "")
        source = {"type": "base64", "media_type": mime, "data": p["inlineData"].get("data", "")}
        if mime.startswith("image/"):
            return {"type": "image", "source": source}
        if mime == "application/pdf":
            return {"type": "document", "source": source}
    if "fileData" in p:
        mime, uri = p["fileData"].get("mimeType", ""), p["fileData"].get("fileUri", "")
        if uri.startswith(("https://", "http://")):
            return {"type": "document" if mime == "application/pdf" else "image", "source": {"type": "url", "url": uri}}
    raise InvalidRequest("a part cannot be expressed for the Anthropic API", status=400)


# --- replies ------------------------------------------------------------------------


def _usage(u: Any, output_tokens: int | None = None) -> Usage:
    read = int(getattr(u, "cache_read_input_tokens", 0) or 0)
    write = int(getattr(u, "cache_creation_input_tokens", 0) or 0)
    prompt = int(getattr(u, "input_tokens", 0) or 0) + read + write
    output = int(output_tokens if output_tokens is not None else (getattr(u, "output_tokens", 0) or 0))
    return Usage(prompt_tokens=prompt, cached_prompt_tokens=read, output_tokens=output, total_tokens=prompt + output,
                 cache_write_tokens=write)


def _part(block: Any) -> JSON | None:
    kind = getattr(block, "type", "")
    if kind == "text":
        return {"text": block.text}
    if kind == "tool_use":
        return {"functionCall": {"id": block.id, "name": block.name, "args": dict(block.input or {})}}
    if kind == "thinking":
        return {"text": block.thinking, "thought": True}
    return None


def reply(message: Any) -> ModelReply:
    parts = [p for p in (_part(b) for b in message.content) if p]
    return ModelReply(
        content={"role": "model", "parts": parts} if parts else None,
        finish_reason=_FINISH.get(message.stop_reason or "", "OTHER" if message.stop_reason else ""),
        usage=_usage(message.usage),
        model_version=message.model or "",
    )


async def chunks(stream: Any, model: str) -> AsyncGenerator[ModelReply, None]:
    """Text deltas as they come; a tool call once its input is complete; the
    finish reason and usage on the last chunk."""
    start_usage: Any = None
    version = model
    tools: dict[int, JSON] = {}
    try:
        async for event in stream:
            kind = event.type
            if kind == "message_start":
                start_usage, version = event.message.usage, event.message.model or model
            elif kind == "content_block_start" and event.content_block.type == "tool_use":
                tools[event.index] = {"id": event.content_block.id, "name": event.content_block.name, "json": ""}
            elif kind == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta" and delta.text:
                    yield ModelReply(content={"role": "model", "parts": [{"text": delta.text}]}, model_version=version)
                elif delta.type == "input_json_delta" and event.index in tools:
                    tools[event.index]["json"] += delta.partial_json
            elif kind == "content_block_stop" and event.index in tools:
                tool = tools.pop(event.index)
                try:
                    args = json.loads(tool["json"]) if tool["json"] else {}
                except json.JSONDecodeError:
                    yield ModelReply(finish_reason="MALFORMED_FUNCTION_CALL", model_version=version)
                    return
                yield ModelReply(content={"role": "model", "parts": [
                    {"functionCall": {"id": tool["id"], "name": tool["name"], "args": args}}]}, model_version=version)
            elif kind == "message_delta":
                stop = event.delta.stop_reason or ""
                usage = _usage(start_usage, event.usage.output_tokens) if start_usage is not None else None
                yield ModelReply(finish_reason=_FINISH.get(stop, "OTHER" if stop else ""), usage=usage,
                                 model_version=version)
    finally:
        await stream.close()
