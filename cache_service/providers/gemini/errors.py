"""How google-genai's errors read, for the shared table (providers.errors)."""

from __future__ import annotations

import re
from typing import Any

from google.genai import errors as genai_errors

from cache_service.providers.errors import ErrorMap, Failure, Overflow

_MIN_TOKENS = re.compile(r"min_total_token_count\D{0,5}(\d+)")
_WINDOW = re.compile(r"input token count \(?(\d+)\)?.*?allowed \(?(\d+)\)?")


def _compact(message: str) -> str:
    return message.replace(" ", "").replace("_", "")


class GeminiErrors(ErrorMap):
    api = "the Gemini API"
    # Timeouts and lost connections come as httpx errors: unavailable.
    unexpressible = (ValueError, TypeError)
    # 409 is ABORTED or ALREADY_EXISTS here: a retry does not help.
    retryable = frozenset({408})

    def failure(self, exc: BaseException) -> Failure | None:
        if not isinstance(exc, genai_errors.APIError):
            return None
        return Failure(exc.code or 0, (exc.message or "").lower(), retry_after=_retry_delay(exc.details))

    def lost_cache(self, f: Failure) -> bool:
        compact = _compact(f.message)
        names_cache = "cachedcontent" in compact
        return f.status == 404 or (f.status in (400, 403) and names_cache and ("notfound" in compact or f.status == 403))

    def too_small(self, f: Failure) -> tuple[int | None] | None:
        if "too small" not in f.message and "mintotaltokencount" not in _compact(f.message):
            return None
        found = _MIN_TOKENS.search(f.message)
        return (int(found.group(1)) if found else None,)

    def overflow(self, f: Failure) -> Overflow | None:
        if "exceeds the maximum number of tokens" not in f.message and "context window" not in f.message:
            return None
        found = _WINDOW.search(f.message)
        return (int(found.group(1)), int(found.group(2))) if found else (None, None)


def _retry_delay(details: Any) -> float | None:
    try:
        for d in details.get("error", {}).get("details", []) or []:
            if str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
                return float(str(d.get("retryDelay", "")).rstrip("s"))
    except (AttributeError, ValueError, TypeError):
        return None
    return None
