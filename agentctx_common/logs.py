"""Structured logs: one JSON object per line on stderr.

Log records carry counts, sizes, fingerprints, codes and reasons passed as
``extra``; never event content, prompts, resource names or credentials.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, (int, float, bool, str, type(None))) else str(value)
        if record.exc_info and record.exc_info[0] is not None:
            # The type only: exception text can hold request content.
            entry["error_type"] = record.exc_info[0].__name__
        return json.dumps(entry, separators=(",", ":"))


def configure_logging(level: str = "INFO", fmt: str = "json", stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # These log SQL parameters (event content) and HTTP URLs (provider
    # resource names) at DEBUG: never let them below WARNING.
    for noisy in ("aiosqlite", "sqlalchemy.engine", "sqlalchemy.pool", "asyncpg", "httpx", "httpcore",
                  "google_genai", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
