"""The HTTP/1.1 plumbing the Anthropic and OpenAI fakes share: keep-alive,
Content-Length JSON bodies, chunked SSE streams (named events or bare
``data:`` lines), extra response headers (``retry-after``), a request log
without credentials. Each fake runs in its own thread on 127.0.0.1:0."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET_HEADERS = ("authorization", "x-api-key", "api-key")


@dataclass
class RecordedCall:
    """One request a fake received. Credentials are removed from headers."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    op: str = ""


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    # SSE: (event name or None, data: a JSON value or a raw string).
    events: Iterable[tuple[str | None, Any]] | None = None


@dataclass
class Scripted:
    """A scripted failure: the next call of an op answers this."""

    status: int
    body: Any
    headers: dict[str, str]
    after_chunks: int | None = None  # a stream sends this many chunks first


class JsonHttpFake:
    """Base of a fake server: subclasses implement ``dispatch``."""

    thread_name = "fake-http"

    def __init__(self) -> None:
        self.calls: list[RecordedCall] = []
        self._scripts: dict[str, list[Scripted]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name=self.thread_name, daemon=True).start()
        return self.base_url

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, op: str, scripted: Scripted, times: int = 1) -> None:
        with self._lock:
            self._scripts.setdefault(op, []).extend([scripted] * times)

    def take_script(self, op: str) -> Scripted | None:
        with self._lock:
            queue = self._scripts.get(op)
            return queue.pop(0) if queue else None

    def calls_of(self, op: str) -> list[RecordedCall]:
        with self._lock:
            return [c for c in self.calls if c.op == op]

    def handle(self, method: str, path: str, headers: dict[str, str], body: Any) -> Reply:
        lowered = {k.lower(): v for k, v in headers.items()}
        call = RecordedCall(method, path, {k: v for k, v in lowered.items() if k not in SECRET_HEADERS}, body)
        op, reply = self.dispatch(method, path, lowered, body)
        call.op, call.status = op, reply.status
        with self._lock:
            self.calls.append(call)
        return reply

    def dispatch(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[str, Reply]:
        raise NotImplementedError


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: JsonHttpFake

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode(errors="replace")}
        reply = self.server_fake.handle(self.command, self.path.split("?")[0], dict(self.headers.items()), body)
        if reply.events is None:
            data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for name, data in reply.events:
            text = data if isinstance(data, str) else json.dumps(data)
            event = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
            encoded = event.encode()
            self.wfile.write(f"{len(encoded):x}\r\n".encode() + encoded + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    do_GET = do_POST = do_DELETE = _serve


def estimate_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, separators=(",", ":"), sort_keys=True).encode()) // 4)


def unit_vector(seed: str, dims: int) -> list[float]:
    """A deterministic unit vector drawn from a hash of ``seed`` (the
    fakes' embeddings)."""
    raw = b""
    counter = 0
    while len(raw) < dims * 2:
        raw += hashlib.sha256(f"{counter}\0{seed}".encode()).digest()
        counter += 1
    values = [(int.from_bytes(raw[2 * i:2 * i + 2], "big") - 32768) / 32768 for i in range(dims)]
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return [v / norm for v in values]
