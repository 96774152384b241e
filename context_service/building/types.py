"""What the context builder takes and returns, in domain terms.

Transport forms ride along opaquely (``rendered``): the edge that mapped a
request puts its encodings there, and the edge that sends the built
context reuses them, so nothing is converted twice. This package never
looks inside them. The per-call types are named tuples: immutable, and
cheaper to build than frozen dataclasses on the BuildContext hot path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from context_service.domain import selection as sel
from context_service.domain.attachments import AttachmentRef
from context_service.domain.config import ContextConfig, SelectionPolicy
from context_service.domain.model import Content


class RequestContent(NamedTuple):
    """One content of a request. ``rendered``: its transport form as it
    arrived, reused when pruning leaves the content as it is (None: rendered
    when needed). ``identity``: a stable encoding of the content (equal
    identities, equal contents), which lets the builder keep the pruned
    record of a system instruction sent call after call."""

    content: Content
    rendered: object = None
    identity: bytes | None = None


@dataclass(frozen=True, slots=True)
class RequestSettings:
    """Tools, tool config and generation config, passed through unchanged:
    canonical JSON for the accounting, and their transport form."""

    tools: tuple[bytes, ...] = ()
    tool_config: bytes | None = None
    generation_config: bytes | None = None
    rendered: object = None


NO_SETTINGS = RequestSettings()


class BuildRequest(NamedTuple):
    """One context to build. ``policy``: the caller's validated override of
    the session's selection policy (None: none). ``attachments``: validated
    references to artifacts of the session (or its user) to attach."""

    model: str = ""
    system_instruction: RequestContent | None = None
    settings: RequestSettings = NO_SETTINGS
    memory: Sequence[RequestContent] = ()
    inputs: Sequence[RequestContent] = ()
    policy: SelectionPolicy | None = None
    attachments: Sequence[AttachmentRef] = ()


class BuiltContext(NamedTuple):
    """The model request's parts as selected, with their accounting, and
    the session's effective config. Every content record carries its
    transport form in ``rendered``.

    ``memo`` is the history view's (emptied when the history grows): an
    edge may keep derived encodings of the selected history there.
    ``encoded`` is this context's own room for such encodings."""

    parts: sel.RequestParts
    settings: RequestSettings
    selection: sel.Selection
    accounting: sel.Accounting
    config: ContextConfig
    memo: dict[Any, Any]
    encoded: dict[str, Any]

    @property
    def model(self) -> str:
        return self.parts.model

    def contents(self) -> list[sel.ContentRecord]:
        """The selected history (summary first), then the input with the
        memory and the attachments placed in it (``RequestParts.current``)."""
        return [*self.selection.history, *self.parts.current]
