"""How the anthropic SDK's errors read, for the shared table (providers.errors)."""

from __future__ import annotations

import re

import anthropic

from cache_service.providers.errors import ErrorMap, Failure, Overflow
from cache_service.providers.http_logs import retry_after_s

_TOO_LONG = re.compile(r"prompt is too long:\D*(\d+)\s*tokens\s*>\s*(\d+)")
# The prompt fits, the prompt plus max_tokens does not: "input length and
# `max_tokens` exceed context limit: A + B > C".
_NO_ROOM = re.compile(r"input length and `?max_tokens`? exceed context limit:\s*(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")
# Left between the lowered max_tokens and the window (the count is exact).
OUTPUT_MARGIN = 32
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

    def room_for_output(self, exc: BaseException, asked: int) -> int | None:
        """The lower max_tokens a retry may ask for when ``exc`` says the
        prompt fits but not with ``asked`` more tokens; None otherwise, or
        when no reply would fit (then it is an overflow)."""
        f = self.failure(exc)
        found = _NO_ROOM.search(f.message) if f is not None and f.key == 400 else None
        if found is None:
            return None
        room = int(found.group(3)) - int(found.group(1)) - OUTPUT_MARGIN
        return room if 0 < room < asked else None

    def overflow(self, f: Failure) -> Overflow | None:
        no_room = _NO_ROOM.search(f.message)
        if no_room:
            return int(no_room.group(1)), int(no_room.group(3))
        found = _TOO_LONG.search(f.message)
        if found:
            return int(found.group(1)), int(found.group(2))
        return (None, None) if "prompt is too long" in f.message else None
