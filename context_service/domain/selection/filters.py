"""Event filters: which stored events may enter a request.

All set conditions must hold. The current input is never filtered; this
only sees stored history.
"""

from __future__ import annotations

from collections.abc import Callable

from context_service.domain.config import EventFilter
from context_service.domain.selection.records import EventRecord

Predicate = Callable[[EventRecord], bool]


def on_branch(event_branch: str, branch: str) -> bool:
    """True when an event on ``event_branch`` is visible on ``branch``: the
    event's branch is empty, the same, or an ancestor ("a" of "a.b")."""
    return not event_branch or event_branch == branch or branch.startswith(event_branch + ".")


def _not_partial(r: EventRecord) -> bool:
    return not r.partial


def predicate(f: EventFilter | None) -> Predicate:
    """One function testing every set condition, built once per call so the
    per-event test does only the checks the filter asks for."""
    f = f or EventFilter()
    checks: list[Predicate] = []
    if not f.include_partial:
        checks.append(_not_partial)
    if f.authors:
        authors = frozenset(f.authors)
        checks.append(lambda r: r.author in authors)
    if f.exclude_authors:
        excluded = frozenset(f.exclude_authors)
        checks.append(lambda r: r.author not in excluded)
    if f.invocation_ids:
        invocations = frozenset(f.invocation_ids)
        checks.append(lambda r: r.invocation_id in invocations)
    if f.content_types:
        types = frozenset(f.content_types)
        checks.append(lambda r: not types.isdisjoint(r.content_types))
    if f.start_time is not None:
        start = f.start_time
        checks.append(lambda r: r.create_time is not None and r.create_time >= start)
    if f.end_time is not None:
        end = f.end_time
        checks.append(lambda r: r.create_time is not None and r.create_time < end)
    if f.final_only:
        checks.append(lambda r: r.final)
    if f.branch:
        branch = f.branch
        checks.append(lambda r: on_branch(r.branch, branch))
    if len(checks) == 1:
        return checks[0]
    return lambda r: all(check(r) for check in checks)
