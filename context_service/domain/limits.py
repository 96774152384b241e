"""Input limits (sizes, id patterns, page sizes, clock skew) and the helper
that turns field violations into INVALID_ARGUMENT.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentctx_common.errors import FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from context_service.domain.json_depth import DEFAULT_MAX_JSON_DEPTH

# "apps/{app}/users/-" lists every user; "apps/-/..." every app the caller may use.
ALL = "-"
# Never ids, whatever the patterns allow: "-" is the list wildcard and "."
# and ".." read as path steps, so a name holding one is ambiguous.
RESERVED_IDS = frozenset({ALL, ".", ".."})
NOT_RESERVED = "and not be '-', '.' or '..'"


@dataclass(frozen=True)
class Limits:
    """Input limits, from settings. Violations are INVALID_ARGUMENT."""

    max_event_bytes: int = 8 * 1024 * 1024
    max_parts_per_event: int = 256
    max_state_bytes: int = 1024 * 1024
    # Nesting of JSON values (args, results, metadata, state); see json_depth.
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    # Session and event ids (the proto documents 1-128 of [A-Za-z0-9._:-]).
    id_pattern: str = r"[A-Za-z0-9._:-]{1,128}"
    # App and user ids; "@" and "+" allow e-mail-like user ids.
    owner_id_pattern: str = r"[A-Za-z0-9._:@+-]{1,128}"
    default_session_page_size: int = 50
    default_event_page_size: int = 100
    max_page_size: int = 1000
    # How far in the future a client-set event time may be.
    max_clock_skew_s: float = 86400.0
    _id_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _owner_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_id_re", re.compile(self.id_pattern))
        object.__setattr__(self, "_owner_re", re.compile(self.owner_id_pattern))

    def valid_id(self, value: str) -> bool:
        return value not in RESERVED_IDS and self._id_re.fullmatch(value) is not None

    def valid_owner_id(self, value: str) -> bool:
        return value not in RESERVED_IDS and self._owner_re.fullmatch(value) is not None


def raise_if(violations: list[FieldViolation], reason: Reason = Reason.INVALID_ARGUMENT) -> None:
    if violations:
        raise InvalidArgument.fields(violations, reason=reason)

