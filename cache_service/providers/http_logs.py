"""What the SDK-based adapters share: quiet HTTP client logs (their lines
carry URLs and, on some levels, headers) and the retry hint of a response."""

from __future__ import annotations

import logging
from collections.abc import Mapping

_QUIET = ("httpx", "httpx2", "httpcore", "httpcore2")


def silence_http_logs(*extra: str) -> None:
    """Its SDK's own loggers (``extra``) too."""
    for name in (*_QUIET, *extra):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds; an HTTP
    date is not worth parsing here: the caller's default applies)."""
    if not headers:
        return None
    for key, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(key)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None
