"""A fake OpenAI-compatible Chat Completions server for testing the real
``openai`` SDK (base_url points here), in two flavors of error body:
``openai`` ({"error": {message, type, param, code}}) and ``vllm`` (the
top-level {"object": "error", ...} that vLLM and SGLang send, an integer
``code``, and vLLM's own overflow texts: "...However, your request has M
input tokens" for a prompt over the window, and "'max_tokens' or
'max_completion_tokens' is too large" when the prompt fits but prompt plus
``max_completion_tokens`` does not).

Route: ``POST /v1/chat/completions`` (``stream: true`` answers SSE ``data:``
chunks, usage in a last chunk without choices when ``stream_options``
asks, then ``data: [DONE]``). It checks the bearer key, roles, the
tool_calls/tool message pairing (``tool_rules.openai_violation``), and
``tools`` shapes.

Automatic prefix caching as OpenAI documents it: a prompt of at least
``min_cache_tokens`` reads the longest prefix (at message boundaries) that
an earlier request with the same ``prompt_cache_key`` (or none) sent, and
every request's prefixes are cached; usage reports
``prompt_tokens_details.cached_tokens``. From gpt-5.6 (the models that bill
their writes) it also reports ``prompt_tokens_details.cache_write_tokens``:
the prompt tokens past the read that this request cached (none below the
minimum); earlier models report no write.

Prompt-cache retention per model (``openai`` flavor): gpt-5.5 refuses
``prompt_cache_retention: "in_memory"`` (only "24h"); from gpt-5.6
``prompt_cache_options`` (ttl "30m") supersedes it, "in_memory" is refused
and both together are rejected; earlier models have no
``prompt_cache_options``. Refusals are 400 ``invalid_parameter`` with the
``param`` named.

Replies: if tools are declared and the last user text names one, a tool
call of it (``finish_reason: tool_calls``); else "fake reply to N messages".

Embeddings: ``POST /v1/embeddings`` (op ``embed``) as OpenAI answers it:
the text-embedding-3 models (1536 and 3072 dimensions, shortened by
``dimensions``) and text-embedding-ada-002 (1536; ``dimensions`` refused);
an unknown model is a 404 ``model_not_found``; no input, an empty string
or more than 2048 inputs a 400 on ``$.input``; ``encoding_format:
"base64"`` (the SDK's default) answers little-endian float32 in base64.
Vectors are deterministic per (model, text), unit length.

Knobs: ``fail(op, status, message, code=, retry_after=, after_chunks=)`` for
the next ``generate`` or ``stream``; ``fail_rate_limited``;
``fail_context_length``. Tokens: JSON bytes / 4.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import struct
import time
from collections.abc import Iterator
from typing import Any

from tests.fakes.http_json import JsonHttpFake, Reply, Scripted, estimate_tokens, unit_vector
from tests.fakes.tool_rules import openai_violation

_GPT = re.compile(r"^gpt-(\d+)(?:\.(\d+))?")
# Embedding model -> (native dimensions, takes ``dimensions``).
EMBEDDING_MODELS = {"text-embedding-3-small": (1536, True), "text-embedding-3-large": (3072, True),
                    "text-embedding-ada-002": (1536, False)}
MAX_EMBED_INPUTS = 2048
_INPUT_INVALID = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."


def fake_vector(model: str, text: str, dims: int) -> list[float]:
    """The unit vector the fake answers for (model, text)."""
    return unit_vector(f"{model}\0{text}", dims)


def _version(model: str) -> tuple[int, int] | None:
    found = _GPT.match(model)
    return (int(found.group(1)), int(found.group(2) or 0)) if found else None


def _cache_options_refusal(body: dict[str, Any]) -> tuple[str, str] | None:
    """(message, param) of OpenAI's refusal of the request's prompt-cache
    retention: gpt-5.5 takes only "24h"; from gpt-5.6 prompt_cache_options
    (ttl "30m", the only value) supersedes prompt_cache_retention, "in_memory"
    is refused and setting both is rejected; before 5.6 there is no
    prompt_cache_options."""
    version = _version(str(body.get("model", "")))
    retention, options = body.get("prompt_cache_retention"), body.get("prompt_cache_options")
    if retention is not None and retention not in ("in_memory", "24h"):
        return f"Invalid value: '{retention}'.", "prompt_cache_retention"
    if version is None or version < (5, 5):
        return ("prompt_cache_options is not supported with this model.", "prompt_cache_options") if options else None
    if retention == "in_memory":
        return "This model is compatible only with 24h extended prompt caching", "prompt_cache_retention"
    if version < (5, 6):
        return ("prompt_cache_options is not supported with this model.", "prompt_cache_options") if options else None
    if options is not None and retention is not None:
        return "prompt_cache_retention cannot be set together with prompt_cache_options.", "prompt_cache_retention"
    if options is not None and options.get("ttl", "30m") != "30m":
        return f"Invalid value: '{options.get('ttl')}'. Supported values are: '30m'.", "prompt_cache_options.ttl"
    return None


class FakeOpenAI(JsonHttpFake):
    thread_name = "fake-openai"

    def __init__(self, *, api_key: str | None = None, min_cache_tokens: int = 64, context_window: int = 128_000,
                 flavor: str = "openai") -> None:
        super().__init__()
        self.api_key = api_key or f"sk-fake-{secrets.token_hex(8)}"
        self.min_cache_tokens = min_cache_tokens
        self.context_window = context_window
        self.flavor = flavor
        self.cached: dict[tuple[str, str], float] = {}  # (cache key, prefix hash) -> last use

    # --- knobs ----------------------------------------------------------------

    def error_body(self, status: int, message: str, code: str | None, error_type: str) -> Any:
        if self.flavor == "vllm":
            return {"object": "error", "message": message, "type": error_type, "param": None, "code": status}
        return {"error": {"message": message, "type": error_type, "param": None, "code": code}}

    def fail(self, op: str, status: int, message: str = "scripted failure", *, code: str | None = None,
             error_type: str = "server_error", retry_after: str | None = None, after_chunks: int | None = None,
             times: int = 1) -> None:
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        self.script(op, Scripted(status, self.error_body(status, message, code, error_type), headers, after_chunks),
                    times)

    def fail_rate_limited(self, op: str = "generate", retry_after: str = "7") -> None:
        self.fail(op, 429, "Rate limit reached for requests", code="rate_limit_exceeded", error_type="requests",
                  retry_after=retry_after)

    def context_message(self, prompt: int) -> str:
        if self.flavor == "vllm":
            return (f"This model's maximum context length is {self.context_window} tokens. However, your request "
                    f"has {prompt} input tokens. Please reduce the length of the input messages.")
        return (f"This model's maximum context length is {self.context_window} tokens. However, your messages "
                f"resulted in {prompt} tokens. Please reduce the length of the messages.")

    def fail_context_length(self, op: str = "generate", prompt: int = 130_000) -> None:
        self.fail(op, 400, self.context_message(prompt), code="context_length_exceeded",
                  error_type="invalid_request_error")

    # --- requests -------------------------------------------------------------

    def dispatch(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[str, Reply]:
        if method == "POST" and path == "/v1/embeddings":
            return "embed", self._embed(headers, body)
        if method != "POST" or path != "/v1/chat/completions":
            return "", Reply(404, self.error_body(404, "not found", "not_found", "invalid_request_error"))
        op = "stream" if body.get("stream") else "generate"
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return op, Reply(401, self.error_body(401, "Incorrect API key provided", "invalid_api_key",
                                                  "invalid_request_error"))
        scripted = self.take_script(op)
        if scripted is not None and scripted.after_chunks is None:
            return op, Reply(scripted.status, scripted.body, scripted.headers)
        invalid = self._validate(body)
        if invalid is not None:
            return op, Reply(400, self.error_body(400, invalid, None, "invalid_request_error"))
        unpaired = openai_violation(body["messages"])
        if unpaired is not None:
            error = self.error_body(400, unpaired[0], None, "invalid_request_error")
            if self.flavor == "openai":
                error["error"]["param"] = unpaired[1]
            return op, Reply(400, error)
        refused = _cache_options_refusal(body) if self.flavor == "openai" else None
        if refused is not None:
            error = self.error_body(400, refused[0], "invalid_parameter", "invalid_request_error")
            error["error"]["param"] = refused[1]
            return op, Reply(400, error)
        messages = body["messages"]
        prompt = estimate_tokens([body.get("tools") or [], messages])
        if prompt > self.context_window:
            code = None if self.flavor == "vllm" else "context_length_exceeded"
            kind = "BadRequestError" if self.flavor == "vllm" else "invalid_request_error"
            return op, Reply(400, self.error_body(400, self.context_message(prompt), code, kind))
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        if self.flavor == "vllm" and isinstance(asked, int) and prompt + asked > self.context_window:
            return op, Reply(400, self.error_body(
                400, f"'max_tokens' or 'max_completion_tokens' is too large: {asked}. This model's maximum context "
                f"length is {self.context_window} tokens and your request has {prompt} input tokens "
                f"({asked} > {self.context_window} - {prompt}).", None, "BadRequestError"))
        cached = self._cache(body, prompt)
        details: dict[str, Any] = {"cached_tokens": cached}
        if (_version(str(body["model"])) or (0, 0)) >= (5, 6):
            details["cache_write_tokens"] = prompt - cached if prompt >= self.min_cache_tokens else 0
        message, finish = _answer(body)
        usage = {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5,
                 "prompt_tokens_details": details,
                 "completion_tokens_details": {"reasoning_tokens": 0}}
        completion_id = f"chatcmpl-fake{secrets.token_hex(6)}"
        if op == "generate":
            return op, Reply(200, {"id": completion_id, "object": "chat.completion", "created": int(time.time()),
                                   "model": body["model"], "usage": usage,
                                   "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return op, Reply(200, events=_stream(completion_id, body["model"], message, finish,
                                             usage if include_usage else None, scripted))

    def _embed(self, headers: dict[str, str], body: Any) -> Reply:
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return Reply(401, self.error_body(401, "Incorrect API key provided", "invalid_api_key",
                                              "invalid_request_error"))
        scripted = self.take_script("embed")
        if scripted is not None:
            return Reply(scripted.status, scripted.body, scripted.headers)
        model = str(body.get("model") or "")
        if model not in EMBEDDING_MODELS:
            return Reply(404, self.error_body(404, f"The model `{model}` does not exist or you do not have access "
                                              "to it.", "model_not_found", "invalid_request_error"))
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if (not isinstance(inputs, list) or not inputs or len(inputs) > MAX_EMBED_INPUTS
                or not all(isinstance(i, str) and i for i in inputs)):
            return Reply(400, self.error_body(400, _INPUT_INVALID, None, "invalid_request_error"))
        native, shortens = EMBEDDING_MODELS[model]
        dims = body.get("dimensions")
        if dims is not None:
            if not shortens:
                return Reply(400, self.error_body(400, "This model does not support specifying dimensions.", None,
                                                  "invalid_request_error"))
            if not isinstance(dims, int) or not 1 <= dims <= native:
                return Reply(400, self.error_body(400, f"Invalid value for 'dimensions' = {dims}. Must be less than "
                                                  f"or equal to {native}.", None, "invalid_request_error"))
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            return Reply(400, self.error_body(400, f"Invalid value: '{encoding}'.", "invalid_value",
                                              "invalid_request_error"))
        data = []
        for index, text in enumerate(inputs):
            vector = fake_vector(model, text, dims or native)
            embedding: Any = (base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
                              if encoding == "base64" else vector)
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(max(1, len(t.encode()) // 4) for t in inputs)
        return Reply(200, {"object": "list", "data": data, "model": model,
                           "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _validate(self, body: dict[str, Any]) -> str | None:
        messages = body.get("messages") or []
        if not messages or not body.get("model"):
            return "messages and model are required"
        for tool in body.get("tools") or []:
            if tool.get("type") != "function" or not tool.get("function", {}).get("name"):
                return "tools: each tool must be a function with a name"
        for m in messages:
            role = m.get("role")
            if role not in ("system", "developer", "user", "assistant", "tool"):
                return f"invalid role {role}"
            for tc in m.get("tool_calls") or []:
                json.loads(tc["function"]["arguments"])
        return None

    def _cache(self, body: dict[str, Any], prompt: int) -> int:
        key = str(body.get("prompt_cache_key") or "")
        messages = body["messages"]
        h = hashlib.sha256(json.dumps(body.get("tools") or [], sort_keys=True).encode())
        hashes = []
        for m in messages:
            h.update(json.dumps(m, sort_keys=True).encode())
            hashes.append(h.copy().hexdigest())
        cached = 0
        now = time.time()
        with self._lock:
            if prompt >= self.min_cache_tokens:
                for i in range(len(hashes) - 1, -1, -1):
                    if (key, hashes[i]) in self.cached:
                        tokens = estimate_tokens([body.get("tools") or [], messages[:i + 1]])
                        cached = tokens if tokens >= self.min_cache_tokens else 0
                        break
            for digest in hashes:
                self.cached[(key, digest)] = now
        return cached


def _answer(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    messages = body["messages"]
    names = {t["function"]["name"] for t in body.get("tools") or []}
    last = messages[-1]
    content = last.get("content")
    texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or [] if p.get("type") == "text"]
    if last.get("role") == "user" and names and body.get("tool_choice") != "none":
        for text in texts:
            for word in text.replace(",", " ").split():
                if word in names:
                    call = {"id": f"call_fake{secrets.token_hex(4)}", "type": "function",
                            "function": {"name": word, "arguments": json.dumps({"query": text[:32]})}}
                    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"role": "assistant", "content": f"fake reply to {len(messages)} messages"}, "stop"


def _stream(completion_id: str, model: str, message: dict[str, Any], finish: str, usage: dict[str, Any] | None,
            scripted: Scripted | None) -> Iterator[tuple[str | None, Any]]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("tool_calls"):
        for i, tc in enumerate(message["tool_calls"]):
            args = tc["function"]["arguments"]
            deltas.append({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                                           "function": {"name": tc["function"]["name"], "arguments": ""}}]})
            deltas.append({"tool_calls": [{"index": i, "function": {"arguments": args[:6]}}]})
            deltas.append({"tool_calls": [{"index": i, "function": {"arguments": args[6:]}}]})
    else:
        words = message["content"].split(" ")
        deltas.extend({"content": w + (" " if i < len(words) - 1 else "")} for i, w in enumerate(words))
    for n, delta in enumerate(deltas):
        if scripted is not None and n == scripted.after_chunks:
            # Mid-stream errors come wrapped in "error" in both flavors.
            yield None, {"error": scripted.body.get("error", scripted.body)}
            return
        yield None, chunk(delta)
    yield None, chunk({}, finish)
    if usage is not None:
        yield None, {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": model, "choices": [], "usage": usage}
    yield None, "[DONE]"
