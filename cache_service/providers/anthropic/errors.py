"""How the anthropic SDK's errors read, for the shared table (providers.errors)."""

from __future__ import annotations

import re

import anthropic

from cache_service.providers.errors import ErrorMap, Failure, Overflow
from cache_service.providers.http_logs import retry_after_s

_TOO_LONG = re.compile(r"prompt is too long:\D*(\d+)\s*tokens\s*>\s*(\d+)")
# An error event inside a stream arrives on a 200: its type decides.
_STATUS_OF = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
              "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
              "overloaded_error": 529}


class AnthropicErrors(ErrorMap):
    api = "the Anthropic API"
    timeouts = (anthropic.APITimeoutError,)
    disconnects = (anthropic.APIConnectionError,)

    def failure(self, exc: BaseException) -> Failure | None:
        if not isinstance(exc, anthropic.APIError):
            return None
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else body
        kind = str(error.get("type", "")) if isinstance(error, dict) else ""
        message = str(error.get("message", "")) if isinstance(error, dict) else ""
        status = exc.status_code if isinstance(exc, anthropic.APIStatusError) else None
        headers = exc.response.headers if isinstance(exc, anthropic.APIStatusError) else None
        code = status if status is not None and status >= 400 else _STATUS_OF.get(kind, 500)
        return Failure(code, message, kind, retry_after_s(headers))

    def overflow(self, f: Failure) -> Overflow | None:
        found = _TOO_LONG.search(f.message)
        if found:
            return int(found.group(1)), int(found.group(2))
        return (None, None) if "prompt is too long" in f.message else None
