"""How the openai SDK's errors read, for the shared table (providers.errors)."""

from __future__ import annotations

import re

import openai

from cache_service.providers.errors import ErrorMap, Failure, Overflow
from cache_service.providers.http_logs import retry_after_s

_WINDOW = re.compile(r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens", re.S)
# The codes that decide before the HTTP status does (a quota comes as a 429,
# but a retry does not help; an error inside a stream has no status).
_ROW_OF = {"context_length_exceeded": 400, "insufficient_quota": 403, "rate_limit_exceeded": 429}


class OpenAIErrors(ErrorMap):
    api = "the OpenAI API"
    timeouts = (openai.APITimeoutError,)
    disconnects = (openai.APIConnectionError,)

    def failure(self, exc: BaseException) -> Failure | None:
        if not isinstance(exc, openai.APIError):
            return None
        body = exc.body if isinstance(exc.body, dict) else {}
        message = str(body.get("message") or "")
        code = str(body.get("code") or "")
        status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
        retry = retry_after_s(exc.response.headers) if isinstance(exc, openai.APIStatusError) else None
        row = 400 if _WINDOW.search(message) else _ROW_OF.get(code)
        return Failure(status, message, code, retry, row)

    def overflow(self, f: Failure) -> Overflow | None:
        found = _WINDOW.search(f.message)
        if found:
            return int(found.group(2)), int(found.group(1))
        return (None, None) if f.code == "context_length_exceeded" else None
