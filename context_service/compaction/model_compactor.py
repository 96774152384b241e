"""The MODEL compactor: summarizes through the cache service's
GenerateContent (an uncached call; the cache service holds the provider).

Its prompt names the tools the conversation used and asks for the
conversation's own language, because summaries of summaries drift to
English and lose tool names otherwise (adk-python #6273). The summarizer's
usage is returned apart and recorded on the compaction entry only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from agentctx.cache.v1 import cache_service_pb2
from agentctx.type.v1 import content_pb2, generation_pb2
from agentctx_common.errors import DeadlineExceeded
from context_service.cache_client import CacheClient
from context_service.compaction.compactors import CompactionCall
from context_service.domain import parts
from context_service.domain.compaction_rules import errors
from context_service.domain.compaction_rules.policy import ResolvedPolicy
from context_service.domain.compaction_rules.summary import SummaryRequest, SummaryResult
from context_service.domain.model import Blob, Event, FileData, FunctionCall, FunctionResponse, JsonObject
from context_service.mapping.convert import usage_from_proto

SYSTEM_PROMPT = """You compact an AI agent's conversation history into a summary that replaces it.
The agent will continue the task from your summary plus the most recent messages, so keep everything it needs:
- the user's goals, constraints and preferences;
- decisions made and why;
- progress: what was done, which tools were called and their outcomes (errors included);
- exact identifiers, file paths, URLs, commands, names and numbers;
- open questions and next steps.
Use these sections: Goal, Constraints and preferences, Progress, Key decisions, Next steps, Critical context, Files read, Files modified.
Write the summary in the language the user writes in, not in English unless the user writes English.
Name tools exactly as they are named in the conversation.
If an earlier summary is given, fold it in: keep its facts unless later messages change them.
Answer with the summary only."""

_ROLE_LABEL = {"user": "User", "model": "Assistant"}


def _json(value: JsonObject) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _text(label: str, text: str) -> str | None:
    return f"[{label}] {text}"


def _bytes(label: str, blob: Blob) -> str | None:
    return None  # inline bytes say nothing to a text summarizer


def _file(label: str, fd: FileData) -> str | None:
    return f"[{label} file] {fd.file_uri}"


def _call(label: str, fc: FunctionCall) -> str | None:
    return f"[{label} calls tool {fc.name}] {_json(fc.args)}"


def _result(label: str, fr: FunctionResponse) -> str | None:
    return f"[Tool {fr.name} result] {_json(fr.response)}"


# How the transcript shows each Part kind, by the kind's index in
# ``agentctx_common.part_kinds.KINDS`` (None: the part is left out).
_RENDER: tuple[Callable[[str, Any], str | None], ...] = (_text, _bytes, _file, _call, _result)


def render_transcript(events: tuple[Event, ...]) -> str:
    lines = []
    for e in events:
        if e.content is None:
            continue
        label = _ROLE_LABEL.get(e.content.role, e.content.role)
        for p in e.content.parts:
            kind = parts.kind_of(p)
            if p.thought or kind is None:
                continue
            line = _RENDER[kind.index](label, getattr(p, kind.name))
            if line is not None:
                lines.append(line)
    return "\n".join(lines)


def tool_names(events: tuple[Event, ...]) -> list[str]:
    names: dict[str, None] = {}
    for e in events:
        if e.content is not None:
            for fc in e.content.function_calls:
                names.setdefault(fc.name)
            for fr in e.content.function_responses:
                names.setdefault(fr.name)
    return list(names)


def user_sample(events: tuple[Event, ...], limit: int = 300) -> str:
    """The newest user text: the language reference for the summary."""
    for e in reversed(events):
        if e.content is not None and e.content.role == "user":
            texts = [p.text for p in e.content.parts if p.text and not p.thought]
            if texts:
                return " ".join(texts)[:limit]
    return ""


def build_model_request(request: SummaryRequest, model: str, bytes_per_token: float) -> generation_pb2.ModelRequest:
    blocks = []
    if request.previous_summary:
        blocks.append(f"<earlier_summary>\n{request.previous_summary}\n</earlier_summary>")
    blocks.append(f"<conversation>\n{render_transcript(request.events)}\n</conversation>")
    names = tool_names(request.events)
    if names:
        blocks.append("Tools used (keep these names exactly): " + ", ".join(names))
    sample = user_sample(request.events)
    if sample:
        blocks.append(f"The user's language, as in their latest message: <sample>{sample}</sample>")
    blocks.append(f"Keep the summary under {request.target_summary_bytes} bytes.")
    if request.instructions:
        blocks.append(f"Additional instructions: {request.instructions}")
    return generation_pb2.ModelRequest(
        model=model,
        system_instruction=content_pb2.Content(role="system", parts=[content_pb2.Part(text=SYSTEM_PROMPT)]),
        contents=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="\n\n".join(blocks))])],
        generation_config=generation_pb2.GenerationConfig(
            temperature=0.0,
            max_output_tokens=max(64, math.ceil(request.max_summary_bytes / bytes_per_token)),
        ),
    )


class ModelCompactor:
    name = "model"

    def __init__(self, client: CacheClient) -> None:
        self._client = client

    async def summarize(self, request: SummaryRequest, call: CompactionCall, policy: ResolvedPolicy) -> SummaryResult:
        model_request = build_model_request(request, call.model, policy.bytes_per_token)
        size = model_request.ByteSize()
        if size > policy.max_input_bytes:
            raise errors.input_too_large(size, policy.max_input_bytes)
        rpc = cache_service_pb2.GenerateContentRequest(
            scope=cache_service_pb2.CacheScope(app=call.key.app, user=call.key.user, model=call.model),
            request=model_request,
        )
        try:
            response = await self._client.generate_content(rpc, remaining=min(policy.timeout_s, call.remaining()))
        except DeadlineExceeded:
            raise errors.timeout(self.name, policy.timeout_s) from None
        answer = response.response
        if answer.finish_reason == generation_pb2.FINISH_REASON_SAFETY:
            raise errors.failed(self.name, "SAFETY")
        text = "".join(p.text for p in answer.content.parts if p.HasField("text") and not p.thought)
        usage = usage_from_proto(answer.usage) if answer.HasField("usage") else None
        return SummaryResult(text, usage)
