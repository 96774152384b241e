"""How the openai SDK's errors read, for the shared table (providers.errors)."""

from __future__ import annotations

import re

import openai

from cache_service.providers.errors import ErrorMap, Failure, Overflow
from cache_service.providers.http_logs import retry_after_s

# The window, then the prompt: OpenAI's "...your messages resulted in M
# tokens" (or "you requested M tokens"), vLLM's "...your request has M input
# tokens" and, when the prompt fits but prompt plus max_tokens does not,
# vLLM's "'max_tokens' or 'max_completion_tokens' is too large: X. This
# model's maximum context length is N tokens and your request has M input
# tokens". Each is an overflow: compaction makes room for the reply too.
_WINDOW = re.compile(r"maximum context length is (\d+) tokens.*?"
                     r"(?:resulted in|requested|request has) (\d+)(?: input)? tokens", re.S)
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
        too_large = "'max_tokens' or 'max_completion_tokens' is too large" in f.message
        return (None, None) if f.code == "context_length_exceeded" or too_large else None
