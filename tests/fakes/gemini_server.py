"""A fake Gemini REST server for testing the real google-genai SDK.

It speaks enough HTTP/1.1 (keep-alive, Content-Length bodies, chunked SSE
streams) for the SDK's httpx client, serves the Gemini API and Vertex AI
paths the cache service uses, and records every call (method, path, query,
headers without credentials, JSON body). It runs in its own thread, so it
outlives a service process a test kills.

Paths (any API version prefix; Vertex prefixes ``projects/P/locations/L``):
``cachedContents`` POST/GET(list), ``cachedContents/ID`` GET/PATCH/DELETE,
``models/M:generateContent``, ``models/M:streamGenerateContent?alt=sse``
(Vertex: ``publishers/google/models/M:...``), ``models/M:embedContent``
and ``models/M:batchEmbedContents`` (op ``embed``; Gemini API).

Embeddings as the Gemini API answers them: ``gemini-embedding-001`` (3072
dimensions) and ``text-embedding-004`` (768), shortened by
``outputDimensionality`` (128 to the native size); an unknown model is a
404 NOT_FOUND naming the method, a batch of more than 100 requests, a
request for another model than the URL's, an empty text or an unknown
``taskType`` a 400 INVALID_ARGUMENT. Vectors are deterministic per (model,
task, text), unit length; ``embed_tasks`` records each request's task.

Knobs: ``fail(op, status, ...)`` scripts the next answers of one operation
(429 with RetryInfo, 400 "too small", 403/404 missing cache, a context-window
400, or an error after N streamed chunks); ``forget_caches()`` makes the
provider lose every cache; ``missing_status`` picks 403 or 404 for a missing
cache; ``create_gate`` holds creates until set (``create_arrived`` is set once
one is held). A request whose function calls and responses do not pair
(``tool_rules.gemini_violation``, the cache's contents first) is a 400.
Cache names look like
``cachedContents/fakecache-<hex>`` (``NAME_MARK``) so tests can scan output for
them.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http_json import unit_vector
from tests.fakes.tool_rules import gemini_violation

NAME_MARK = "fakecache-"
# Embedding model -> native dimensions.
EMBEDDING_MODELS = {"gemini-embedding-001": 3072, "text-embedding-004": 768}
MAX_EMBED_BATCH = 100
TASK_TYPES = frozenset({"TASK_TYPE_UNSPECIFIED", "RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "SEMANTIC_SIMILARITY",
                        "CLASSIFICATION", "CLUSTERING", "QUESTION_ANSWERING", "FACT_VERIFICATION",
                        "CODE_RETRIEVAL_QUERY"})
MISSING_MESSAGE = "CachedContent not found (or permission denied)"

_STATUS_TEXT = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
}
_ROUTE = re.compile(
    r"^/(?P<version>v1(?:beta1?)?)/(?:projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/)?"
    r"(?:(?P<caches>cachedContents)(?:/(?P<cache_id>[^/:]+))?"
    r"|(?:publishers/google/)?models/(?P<model>[^/:]+)"
    r":(?P<verb>generateContent|streamGenerateContent|embedContent|batchEmbedContents))$"
)


@dataclass
class RecordedCall:
    """One request the fake received. Credentials are removed from headers."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    status: int = 0
    op: str = ""


@dataclass
class _Scripted:
    status: int
    message: str
    status_text: str
    details: list[dict[str, Any]]
    after_chunks: int | None


@dataclass
class _Cache:
    name: str
    model: str
    body: dict[str, Any]
    tokens: int
    expire: float
    display_name: str
    created: float = field(default_factory=time.time)


def _rfc3339(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _estimate_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, separators=(",", ":")).encode()) // 4)


def _duration_s(text: str) -> float:
    return float(text.rstrip("s"))


class FakeGemini:
    """The fake server. ``start()`` returns its base URL; ``stop()`` ends it."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        min_cache_tokens: int = 64,
        context_window: int = 1_000_000,
        missing_status: int = 403,
    ) -> None:
        self.api_key = api_key or f"fake-gemini-key-{secrets.token_hex(8)}"
        self.min_cache_tokens = min_cache_tokens
        self.context_window = context_window
        self.missing_status = missing_status
        self.calls: list[RecordedCall] = []
        self.caches: dict[str, _Cache] = {}
        self.deleted: list[str] = []
        self.create_gate: threading.Event | None = None
        self.create_arrived = threading.Event()
        self._scripts: dict[str, list[_Scripted]] = {}
        self.embed_tasks: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------

    def start(self) -> str:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-gemini",
                                        daemon=True)
        self._thread.start()
        return self.base_url

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self.create_gate is not None:
            self.create_gate.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGemini:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- knobs --------------------------------------------------------------

    def fail(
        self,
        op: str,
        status: int,
        message: str | None = None,
        *,
        status_text: str | None = None,
        retry_delay: str | None = None,
        times: int = 1,
        after_chunks: int | None = None,
    ) -> None:
        """The next ``times`` calls of ``op`` (create, get, update, delete,
        list, generate, stream) answer ``status``. With ``after_chunks`` a
        stream first sends that many chunks, then the error."""
        details: list[dict[str, Any]] = []
        if retry_delay is not None:
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay})
        scripted = _Scripted(
            status, message or f"scripted {status}", status_text or _STATUS_TEXT.get(status, "UNKNOWN"),
            details, after_chunks,
        )
        with self._lock:
            self._scripts.setdefault(op, []).extend([scripted] * times)

    def fail_too_small(self, times: int = 1) -> None:
        self.fail("create", 400, "Cached content is too small. total_token_count=12, min_total_token_count=4096",
                  times=times)

    def fail_context_window(self, prompt_tokens: int = 1_200_000, window: int = 1_048_576) -> None:
        self.fail("generate", 400, f"The input token count ({prompt_tokens}) exceeds the maximum number of "
                  f"tokens allowed ({window}).")

    def forget_caches(self) -> None:
        """The provider loses every cache (as after an expiry we did not see)."""
        with self._lock:
            self.caches.clear()

    # --- views --------------------------------------------------------------

    def calls_of(self, op: str) -> list[RecordedCall]:
        with self._lock:
            return [c for c in self.calls if c.op == op]

    def live_names(self) -> set[str]:
        now = time.time()
        with self._lock:
            return {name for name, c in self.caches.items() if c.expire > now}

    # --- request handling (called on server threads) ---------------------------

    def _take_script(self, op: str) -> _Scripted | None:
        with self._lock:
            queue = self._scripts.get(op)
            return queue.pop(0) if queue else None

    def _record(self, call: RecordedCall) -> None:
        with self._lock:
            self.calls.append(call)

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: Any) -> tuple[int, Any, Iterator[Any] | None, str]:
        """Returns (status, json body, SSE chunk iterator or None, op)."""
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query)
        recorded_headers = {k.lower(): v for k, v in headers.items() if k.lower() not in ("x-goog-api-key", "authorization")}
        call = RecordedCall(method, parts.path, query, recorded_headers, body)
        match = _ROUTE.match(parts.path)
        op = _op_of(method, match)
        call.op = op
        status, payload, stream = self._dispatch(op, match, headers, body, query)
        call.status = status
        self._record(call)
        return status, payload, stream, op

    def _dispatch(self, op: str, match: re.Match[str] | None, headers: dict[str, str], body: Any,
                  query: dict[str, list[str]]) -> tuple[int, Any, Iterator[Any] | None]:
        if match is None or not op:
            return _error(404, "no such route", "NOT_FOUND")
        lowered = {k.lower(): v for k, v in headers.items()}
        if match["project"] is None and lowered.get("x-goog-api-key") != self.api_key:
            return _error(400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT")
        scripted = self._take_script(op)
        if scripted is not None and scripted.after_chunks is None:
            return _error(scripted.status, scripted.message, scripted.status_text, scripted.details)
        prefix = f"projects/{match['project']}/locations/{match['location']}/" if match["project"] else ""
        if op == "embed":
            return self._embed(match["model"], match["verb"], body)
        if op == "create":
            return self._create(prefix, body)
        if op == "list":
            with self._lock:
                items = [self._cache_json(c) for c in self.caches.values()]
            return 200, {"cachedContents": items}, None
        name = f"{prefix}cachedContents/{match['cache_id']}" if match["cache_id"] else ""
        if op == "get":
            cache = self._live(name)
            return (200, self._cache_json(cache), None) if cache else self._missing()
        if op == "update":
            return self._update(name, body)
        if op == "delete":
            with self._lock:
                cache = self.caches.pop(name, None)
                if cache is not None:
                    self.deleted.append(name)
            return (200, {}, None) if cache else self._missing()
        return self._generate(op, match["model"], body, scripted)

    def _missing(self) -> tuple[int, Any, None]:
        if self.missing_status == 404:
            return _error(404, "Requested entity was not found.", "NOT_FOUND")
        return _error(403, MISSING_MESSAGE, "PERMISSION_DENIED")

    def _live(self, name: str) -> _Cache | None:
        with self._lock:
            cache = self.caches.get(name)
        return cache if cache is not None and cache.expire > time.time() else None

    def _cache_json(self, c: _Cache) -> dict[str, Any]:
        return {
            "name": c.name, "model": c.model, "displayName": c.display_name,
            "createTime": _rfc3339(c.created), "updateTime": _rfc3339(c.created),
            "expireTime": _rfc3339(c.expire), "usageMetadata": {"totalTokenCount": c.tokens},
        }

    def _create(self, prefix: str, body: dict[str, Any]) -> tuple[int, Any, None]:
        if self.create_gate is not None:
            self.create_arrived.set()
            self.create_gate.wait(timeout=30)
        cached = {k: body.get(k) for k in ("contents", "systemInstruction", "tools", "toolConfig") if body.get(k)}
        tokens = _estimate_tokens(cached)
        if tokens < self.min_cache_tokens:
            return _error(400, f"Cached content is too small. total_token_count={tokens}, "
                          f"min_total_token_count={self.min_cache_tokens}", "INVALID_ARGUMENT")
        ttl = _duration_s(body["ttl"]) if "ttl" in body else 3600.0
        cache = _Cache(
            name=f"{prefix}cachedContents/{NAME_MARK}{secrets.token_hex(6)}", model=body.get("model", ""),
            body=json.loads(json.dumps(cached)), tokens=tokens, expire=time.time() + ttl,
            display_name=body.get("displayName", ""),
        )
        with self._lock:
            self.caches[cache.name] = cache
        return 200, self._cache_json(cache), None

    def _update(self, name: str, body: dict[str, Any]) -> tuple[int, Any, None]:
        cache = self._live(name)
        if cache is None:
            return self._missing()
        if "ttl" in body:
            cache.expire = time.time() + _duration_s(body["ttl"])
        elif "expireTime" in body:
            cache.expire = dt.datetime.fromisoformat(body["expireTime"].replace("Z", "+00:00")).timestamp()
        return 200, self._cache_json(cache), None

    def _embed(self, model: str, verb: str, body: dict[str, Any]) -> tuple[int, Any, None]:
        if model not in EMBEDDING_MODELS:
            return _error(404, f"models/{model} is not found for API version v1beta, or is not supported for "
                          f"{verb}. Call ListModels to see the list of available models and their supported "
                          "methods.", "NOT_FOUND")
        batch = verb == "batchEmbedContents"
        requests = body.get("requests") if batch else [{**body, "model": body.get("model", f"models/{model}")}]
        if not isinstance(requests, list) or not requests:
            return _error(400, "* BatchEmbedContentsRequest.requests: requests is not specified", "INVALID_ARGUMENT")
        if len(requests) > MAX_EMBED_BATCH:
            return _error(400, f"* BatchEmbedContentsRequest.requests: at most {MAX_EMBED_BATCH} requests can be in "
                          "one batch", "INVALID_ARGUMENT")
        native = EMBEDDING_MODELS[model]
        out = []
        for i, request in enumerate(requests):
            where = f"BatchEmbedContentsRequest.requests[{i}]" if batch else "EmbedContentRequest"
            if request.get("model") != f"models/{model}":
                return _error(400, f"* {where}.model: the model must be models/{model}", "INVALID_ARGUMENT")
            texts = [p.get("text", "") for p in (request.get("content") or {}).get("parts") or []]
            if not texts or not all(texts):
                return _error(400, f"* {where}.content.parts[0].data: required oneof field 'data' must have one "
                              "initialized field", "INVALID_ARGUMENT")
            task = request.get("taskType", "TASK_TYPE_UNSPECIFIED")
            if task not in TASK_TYPES:
                where_task = f"requests[{i}].task_type" if batch else "task_type"
                return _error(400, f"Invalid value at '{where_task}' "
                              f"(type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), \"{task}\"",
                              "INVALID_ARGUMENT")
            dims = request.get("outputDimensionality") or native
            if not isinstance(dims, int) or not 128 <= dims <= native:
                return _error(400, f"* {where}.output_dimensionality: must be between 128 and {native}",
                              "INVALID_ARGUMENT")
            with self._lock:
                self.embed_tasks.append(task)
            out.append({"values": unit_vector(f"{model}\0{task}\0{' '.join(texts)}", dims)})
        return 200, ({"embeddings": out} if batch else {"embedding": out[0]}), None

    def _generate(self, op: str, model: str, body: dict[str, Any], scripted: _Scripted | None) -> tuple[int, Any, Iterator[Any] | None]:
        cached_tokens = 0
        if body.get("cachedContent"):
            if any(k in body for k in ("systemInstruction", "tools", "toolConfig")):
                return _error(400, "CachedContent can not be used with GenerateContent request setting "
                              "system_instruction, tools or tool_config.", "INVALID_ARGUMENT")
            cache = self._live(body["cachedContent"])
            if cache is None:
                return self._missing()
            cached_tokens = cache.tokens
        contents = body.get("contents") or []
        if not contents:
            return _error(400, "* GenerateContentRequest.contents: contents is not specified", "INVALID_ARGUMENT")
        cached = self._live(body["cachedContent"]) if body.get("cachedContent") else None
        unpaired = gemini_violation([*(cached.body.get("contents") or [] if cached else []), *contents])
        if unpaired is not None:
            return _error(400, unpaired, "INVALID_ARGUMENT")
        uncached = {k: body.get(k) for k in ("contents", "systemInstruction", "tools", "toolConfig") if body.get(k)}
        prompt = cached_tokens + _estimate_tokens(uncached)
        if prompt > self.context_window:
            return _error(400, f"The input token count ({prompt}) exceeds the maximum number of tokens "
                          f"allowed ({self.context_window}).", "INVALID_ARGUMENT")
        text = f"fake reply to {len(contents)} contents"
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": 5, "totalTokenCount": prompt + 5}
        if cached_tokens:
            usage["cachedContentTokenCount"] = cached_tokens
        if op == "generate":
            return 200, {
                "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                                "index": 0}],
                "usageMetadata": usage, "modelVersion": model,
            }, None
        words = text.split(" ")
        chunks: list[Any] = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": w + " "}]}, "index": 0}],
             "modelVersion": model}
            for w in words[:-1]
        ]
        chunks.append({
            "candidates": [{"content": {"role": "model", "parts": [{"text": words[-1]}]}, "finishReason": "STOP",
                            "index": 0}],
            "usageMetadata": usage, "modelVersion": model,
        })
        if scripted is not None:
            err = {"error": {"code": scripted.status, "message": scripted.message, "status": scripted.status_text}}
            chunks = [*chunks[:scripted.after_chunks], err]
        return 200, None, iter(chunks)


def _op_of(method: str, match: re.Match[str] | None) -> str:
    if match is None:
        return ""
    if match["caches"]:
        if match["cache_id"] is None:
            return {"POST": "create", "GET": "list"}.get(method, "")
        return {"GET": "get", "PATCH": "update", "DELETE": "delete"}.get(method, "")
    if method != "POST":
        return ""
    if match["verb"] in ("embedContent", "batchEmbedContents"):
        return "embed"
    return "generate" if match["verb"] == "generateContent" else "stream"


def _error(status: int, message: str, status_text: str, details: list[dict[str, Any]] | None = None) -> tuple[int, Any, None]:
    err: dict[str, Any] = {"code": status, "message": message, "status": status_text}
    if details:
        err["details"] = details
    return status, {"error": err}, None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeGemini

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode(errors="replace")}
        status, payload, stream, _ = self.server_fake.handle(
            self.command, self.path, dict(self.headers.items()), body if body is not None else {}
        )
        if stream is None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in stream:
            event = f"data: {json.dumps(chunk)}\r\n\r\n".encode()
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    do_GET = do_POST = do_PATCH = do_DELETE = _serve
