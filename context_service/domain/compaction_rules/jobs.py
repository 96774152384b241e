"""A background compaction job as the worker sees it."""

from __future__ import annotations

from dataclasses import dataclass

from context_service.domain.model import CompactionTrigger, SessionKey


@dataclass(frozen=True, slots=True)
class Job:
    job_id: str
    key: SessionKey
    trigger: CompactionTrigger
    attempts: int  # including the current one
