"""A fake Anthropic Messages API server for testing the real ``anthropic``
SDK (base_url points here).

Routes: ``POST /v1/messages`` (``stream: true`` answers SSE: message_start,
content_block_start/delta/stop, message_delta, message_stop, pings) and
``POST /v1/messages/count_tokens``. It checks the API key (``x-api-key``,
or a bearer ``authorization`` as this SDK sends it),
``anthropic-version``, ``max_tokens`` (and that the prompt plus it fits
the window: "input length and `max_tokens` exceed context limit"), roles, the tool_use/tool_result pairing
(``tool_rules.anthropic_violation``), at most 4 ``cache_control`` blocks, no ``ttl: "1h"``
breakpoint after a 5-minute one (in the order tools, system, messages), and
not both ``temperature`` and ``top_p`` on Claude Opus 4.1 and Claude 4.5 and
later. Refusals are Anthropic's: 400 ``{"type": "error", "error": {"type":
"invalid_request_error", "message": ...}}``.

Prompt caching as Anthropic documents it: the request is a sequence of
blocks (tools, then system, then each message's content blocks). At each
block carrying ``cache_control`` the longest prefix already written, ending
at most 20 blocks before it, is read; the rest up to the breakpoint is
written for its TTL ("5m" default, or "1h") when the prefix reaches
``min_cache_tokens`` (None: the model's documented minimum, ``MINIMUMS``;
below it the breakpoint is ignored without an error). A read refreshes the prefix. Usage reports
``cache_creation_input_tokens`` (with the 5m/1h split),
``cache_read_input_tokens`` and the uncached ``input_tokens``.

Replies: if tools are declared and the last user text names one, a tool_use
of it (``stop_reason: tool_use``); else the text "fake reply to N messages".

Knobs: ``fail(op, status, error_type, message, retry_after=, after_chunks=)``
for the next call of ``generate``, ``stream`` or ``count``;
``fail_rate_limited``; ``fail_prompt_too_long``. Tokens: JSON bytes / 4.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Iterator
from typing import Any

from tests.fakes.http_json import JsonHttpFake, Reply, Scripted, estimate_tokens
from tests.fakes.tool_rules import anthropic_violation

LOOKBACK_BLOCKS = 20
# The models that take temperature or top_p but not both: Claude Opus 4.1,
# and every Claude from 4.5 on (sonnet, haiku, opus 4-5, 4-6, ...).
_ONE_SAMPLER = re.compile(r"^claude-(?:opus-4-1|(?:opus|sonnet|haiku)-(?:4-[5-9]|[5-9]))(?:\D|$)")
_TTL = {"5m": 300.0, "1h": 3600.0}
# Anthropic's documented minimum cacheable prefix by model (default 1,024).
MINIMUMS = ((re.compile(r"^claude-(?:opus-4-[5-7]|haiku-4-5)(?:\D|$)"), 4096),
            (re.compile(r"^claude-(?:3-haiku|3-5-haiku|haiku-3)"), 2048))


def model_minimum(model: str) -> int:
    return next((tokens for pattern, tokens in MINIMUMS if pattern.match(model)), 1024)


def _error(status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": error_type, "message": message}}, headers or {})


class FakeAnthropic(JsonHttpFake):
    thread_name = "fake-anthropic"

    def __init__(self, *, api_key: str | None = None, min_cache_tokens: int | None = 64,
                 context_window: int = 200_000) -> None:
        super().__init__()
        self.api_key = api_key or f"sk-ant-fake-{secrets.token_hex(8)}"
        self.min_cache_tokens = min_cache_tokens
        self.context_window = context_window
        self.written: dict[str, tuple[float, str]] = {}  # prefix hash -> (expiry, ttl)

    # --- knobs ----------------------------------------------------------------

    def fail(self, op: str, status: int, error_type: str, message: str = "scripted failure", *,
             retry_after: str | None = None, after_chunks: int | None = None, times: int = 1) -> None:
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        body = {"type": "error", "error": {"type": error_type, "message": message}}
        self.script(op, Scripted(status, body, headers, after_chunks), times)

    def fail_rate_limited(self, op: str = "generate", retry_after: str = "7") -> None:
        self.fail(op, 429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                  retry_after=retry_after)

    def fail_prompt_too_long(self, op: str = "generate", prompt: int = 212_345, window: int = 200_000) -> None:
        self.fail(op, 400, "invalid_request_error", f"prompt is too long: {prompt} tokens > {window} maximum")

    def forget_prefixes(self) -> None:
        with self._lock:
            self.written.clear()

    # --- requests -------------------------------------------------------------

    def dispatch(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[str, Reply]:
        if method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return "", _error(404, "not_found_error", "Not found")
        op = "count" if path.endswith("count_tokens") else ("stream" if body.get("stream") else "generate")
        if self.api_key not in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer ")):
            return op, _error(401, "authentication_error", "invalid x-api-key")
        if not headers.get("anthropic-version"):
            return op, _error(400, "invalid_request_error", "anthropic-version: header is required")
        scripted = self.take_script(op)
        if scripted is not None and scripted.after_chunks is None:
            return op, Reply(scripted.status, scripted.body, scripted.headers)
        invalid = self._validate(body, count=op == "count")
        if invalid is not None:
            return op, invalid
        blocks = _blocks(body)
        prompt = estimate_tokens(_plain(blocks))
        if prompt > self.context_window:
            return op, _error(400, "invalid_request_error",
                              f"prompt is too long: {prompt} tokens > {self.context_window} maximum")
        if op == "count":
            return op, Reply(200, {"input_tokens": prompt})
        if prompt + body["max_tokens"] > self.context_window:
            # The prompt fits, the prompt plus the reply it allows does not.
            return op, _error(400, "invalid_request_error",
                              f"input length and `max_tokens` exceed context limit: {prompt} + "
                              f"{body['max_tokens']} > {self.context_window}, decrease input length or "
                              "`max_tokens` and try again")
        minimum = self.min_cache_tokens if self.min_cache_tokens is not None else model_minimum(body["model"])
        read, write_5m, write_1h = self._cache(blocks, minimum)
        usage = {
            "input_tokens": prompt - read - write_5m - write_1h,
            "cache_creation_input_tokens": write_5m + write_1h,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write_5m, "ephemeral_1h_input_tokens": write_1h},
            "output_tokens": 5,
        }
        content, stop = _answer(body)
        message = {"id": f"msg_fake{secrets.token_hex(6)}", "type": "message", "role": "assistant",
                   "model": body["model"], "content": content, "stop_reason": stop, "stop_sequence": None,
                   "usage": usage}
        if op == "generate":
            return op, Reply(200, message)
        return op, Reply(200, events=_stream(message, scripted))

    def _validate(self, body: dict[str, Any], *, count: bool) -> Reply | None:
        if not count and not isinstance(body.get("max_tokens"), int):
            return _error(400, "invalid_request_error", "max_tokens: Field required")
        messages = body.get("messages") or []
        if not messages:
            return _error(400, "invalid_request_error", "messages: at least one message is required")
        if "temperature" in body and "top_p" in body and _ONE_SAMPLER.match(str(body.get("model", ""))):
            return _error(400, "invalid_request_error",
                          "`temperature` and `top_p` cannot both be specified for this model. Please use only one.")
        marks = sum(1 for b in _blocks(body) if isinstance(b, dict) and b.get("cache_control"))
        if marks > 4:
            return _error(400, "invalid_request_error",
                          f"A maximum of 4 blocks with cache_control may be provided. Found {marks}.")
        ttls = [b["cache_control"].get("ttl", "5m") for b in _blocks(body)
                if isinstance(b, dict) and b.get("cache_control")]
        if "5m" in ttls and "1h" in ttls[ttls.index("5m"):]:
            return _error(400, "invalid_request_error",
                          "A ttl='1h' cache_control block must not come after a ttl='5m' cache_control block. "
                          "Note that blocks are processed in the following order: `tools`, `system`, `messages`.")
        for m in messages:
            if m.get("role") not in ("user", "assistant"):
                return _error(400, "invalid_request_error", "messages: roles must be user or assistant")
        unpaired = anthropic_violation(messages)
        if unpaired is not None:
            return _error(400, "invalid_request_error", unpaired)
        return None

    def _cache(self, blocks: list[Any], minimum: int) -> tuple[int, int, int]:
        """(tokens read, written for 5 minutes, written for an hour)."""
        now = time.time()
        hashes = []
        h = hashlib.sha256()
        plain = _plain(blocks)
        for stripped in plain:
            h.update(json.dumps(stripped, sort_keys=True).encode())
            hashes.append(h.copy().hexdigest())
        read = w5 = w1 = 0
        covered = 0
        with self._lock:
            before = dict(self.written)  # what earlier requests wrote
            for i, block in enumerate(blocks):
                control = block.get("cache_control") if isinstance(block, dict) else None
                if not control:
                    continue
                ttl = control.get("ttl", "5m")
                base = 0
                for j in range(i, max(-1, i - LOOKBACK_BLOCKS - 1), -1):
                    held = before.get(hashes[j])
                    if held is not None and held[0] > now:
                        base = estimate_tokens(plain[:j + 1])
                        read = max(read, base)
                        self.written[hashes[j]] = (now + _TTL[held[1]], held[1])
                        break
                size = estimate_tokens(plain[:i + 1])
                if size < minimum:
                    continue
                fresh = max(0, size - max(base, covered))
                if ttl == "1h":
                    w1 += fresh
                else:
                    w5 += fresh
                covered = max(covered, size)
                self.written[hashes[i]] = (now + _TTL.get(ttl, 300.0), ttl)
        return read, w5, w1


def _plain(blocks: list[Any]) -> list[Any]:
    """The blocks without their cache_control (which is not content: it
    changes neither a prefix's hash nor its tokens)."""
    return [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in blocks]


def _blocks(body: dict[str, Any]) -> list[Any]:
    """The request as cache blocks: tools, system, each message's content."""
    out: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, str):
        out.append({"type": "text", "text": system})
    elif isinstance(system, list):
        out.extend(system)
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m.get("role"), "type": "text", "text": content})
        else:
            out.extend({**b, "role": m.get("role")} for b in content or [])
    return out


def _answer(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    messages = body["messages"]
    names = {t.get("name") for t in body.get("tools") or []}
    last = messages[-1]
    content = last.get("content")
    texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content if b.get("type") == "text"]
    if last.get("role") == "user" and names and (body.get("tool_choice") or {}).get("type") != "none":
        for text in texts:
            for word in text.replace(",", " ").split():
                if word in names:
                    return [{"type": "tool_use", "id": f"toolu_fake{secrets.token_hex(4)}", "name": word,
                             "input": {"query": text[:32]}}], "tool_use"
    return [{"type": "text", "text": f"fake reply to {len(messages)} messages"}], "end_turn"


def _stream(message: dict[str, Any], scripted: Scripted | None) -> Iterator[tuple[str | None, Any]]:
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    sent = 0
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            words = block["text"].split(" ")
            pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
            deltas = [{"type": "text_delta", "text": p} for p in pieces]
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {**block, "input": {}}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": raw[:5]},
                      {"type": "input_json_delta", "partial_json": raw[5:]}]
        for delta in deltas:
            if scripted is not None and sent == scripted.after_chunks:
                yield "error", scripted.body
                return
            sent += 1
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": usage["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}
