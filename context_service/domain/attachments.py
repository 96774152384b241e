"""Attachments: artifacts a BuildContext or Generate request names, sent to
the model as their own section. The rules, pure: which references are
valid, where an attached artifact lives (the request's session, or its
user for a ``user:`` id), the content it becomes, and the section's budget.

The section sits right before the current input (``RequestParts.current``:
after the function responses the input opens with), after every content
the prefix cache may hold: an attachment is volatile input, and a request
that attaches nothing has the same prefix as one that attaches something.

Attachments are never dropped: the caller named each one. Over the budget
(``max_attachment_bytes``, 8 MiB unless the policy says otherwise, and
``max_attachment_tokens``) the call fails RESOURCE_EXHAUSTED
ATTACHMENT_BUDGET_EXCEEDED with a field violation naming the first
artifact that does not fit, as a current input over its budget fails the
call. The check runs twice with the same rule: on the stored sizes before
any content is read (the raw bytes are a lower bound of the section's
bytes), then on the contents as rendered.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentctx_common.errors import FieldViolation, InvalidArgument, NotFound
from agentctx_common.reasons import Reason
from context_service.domain.artifacts import ArtifactScope, ArtifactVersionRecord, artifact_id_violations, scope_of
from context_service.domain.config import SelectionPolicy
from context_service.domain.model import Content, Part, SessionKey
from context_service.domain.parts import data_part
from context_service.domain.selection import errors
from context_service.domain.selection.tokens import estimate

MAX_ATTACHMENTS = 64
PATH = "attachments"


@dataclass(frozen=True, slots=True)
class AttachmentRef:
    """An artifact id and a version (None: the latest)."""

    name: str
    version: int | None = None


def ref_violations(refs: Sequence[AttachmentRef], path: str = PATH) -> list[FieldViolation]:
    """Why ``refs`` are not valid (empty list: valid)."""
    if len(refs) > MAX_ATTACHMENTS:
        return [FieldViolation(path, f"has {len(refs)} artifacts; a request attaches at most {MAX_ATTACHMENTS}")]
    v: list[FieldViolation] = []
    for i, ref in enumerate(refs):
        v += artifact_id_violations(ref.name, f"{path}[{i}].name")
        if ref.version is not None and ref.version < 0:
            v.append(FieldViolation(f"{path}[{i}].version", "must be 0 or more"))
    return v


def check_refs(refs: Sequence[AttachmentRef], reason: Reason, path: str = PATH) -> None:
    """INVALID_ARGUMENT ``reason`` (the request's own) for bad references."""
    violations = ref_violations(refs, path)
    if violations:
        raise InvalidArgument.fields(violations, reason=reason)


def scope(key: SessionKey, ref: AttachmentRef) -> ArtifactScope:
    """Where the artifact lives: the session, or its user for ``user:``."""
    return scope_of(key.app, key.user, key.session, ref.name)


def not_found(ref: AttachmentRef, index: int, path: str = PATH) -> NotFound:
    """NOT_FOUND ARTIFACT_NOT_FOUND naming the artifact in a field
    violation: the caller named it (the message and logs do not)."""
    which = "its latest version" if ref.version is None else f"version {ref.version}"
    return NotFound(
        "an attached artifact does not exist" if ref.version is None else "an attached artifact version does not exist",
        reason=Reason.ARTIFACT_NOT_FOUND,
        metadata={"version": "latest" if ref.version is None else ref.version},
        field_violations=[FieldViolation(f"{path}[{index}]", f"no artifact {ref.name!r} ({which})")],
    )


def label(name: str, record: ArtifactVersionRecord) -> str:
    return f"Attached artifact {name!r} (version {record.version}, {record.mime_type}, {record.size_bytes} bytes):"


def attachment_content(name: str, record: ArtifactVersionRecord, data: bytes) -> Content:
    """One user content: a text part naming the artifact, then its text or
    its bytes as inline data with its mime type."""
    body = data_part(record.text, record.mime_type, data)
    return Content(role="user", parts=(Part(text=label(name, record)), body))


def check_budget(
    names: Sequence[str], sizes: Sequence[int], policy: SelectionPolicy, bytes_per_token: float, path: str = PATH
) -> None:
    """RESOURCE_EXHAUSTED ATTACHMENT_BUDGET_EXCEEDED when ``sizes`` (one
    per attachment, in order) together exceed the policy's attachment
    budget; the field violation names the first attachment past it."""
    max_bytes, max_tokens = policy.max_attachment_bytes, policy.max_attachment_tokens
    used = 0
    for i, (name, size) in enumerate(zip(names, sizes, strict=True)):
        used += size
        over_bytes = max_bytes is not None and used > max_bytes
        over_tokens = max_tokens is not None and estimate(used, bytes_per_token) > max_tokens
        if over_bytes or over_tokens:
            total = sum(sizes)
            raise errors.budget_exceeded(
                Reason.ATTACHMENT_BUDGET_EXCEEDED,
                "the attached artifacts exceed the attachment budget",
                kind="attachment",
                measured_bytes=total,
                measured_tokens=estimate(total, bytes_per_token),
                max_bytes=max_bytes,
                max_tokens=max_tokens,
                bytes_per_token=bytes_per_token,
                field_violations=[FieldViolation(
                    f"{path}[{i}]", f"artifact {name!r} ({size} bytes) takes the attachments to {used} bytes, "
                    "past the attachment budget (max_attachment_bytes/max_attachment_tokens)",
                )],
            )
