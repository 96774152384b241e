"""Retractions in a built context: the history a build selects from leaves
out every event a later retraction takes back (``Event.retracts_event_id``)
and the retractions themselves, which carry nothing for a model.

A filter step over a history view, before selection: the builder applies it
to the whole history (``building.history``) and the bounded reader to its
suffix (``building.tail``), so both give what the client's own view of the
session (stored events, retractions applied) shows. The retracted ids are
found once per view and extended after appends (the memo's "carried"
state); a view with retractions is filtered once per records list and
memo, and selection groups the filtered list again after each append (a
session without retractions costs a length check).

Function calls and their responses stay paired by ``selection.pair_calls``
on the built request: a retracted call's responses are dropped with it, and
a call whose response was retracted gets the synthesized NOT_ANSWERED
response, so no half of a pair is ever sent alone.
"""

from __future__ import annotations

from context_service.building.history import HistoryView, without

# The memo slot of (records scanned, retracted ids): carried across appends.
_SCAN = ("carried", "retractions")
_VIEW = "retractions.view"


def retracted_ids(view: HistoryView) -> frozenset[str]:
    """Ids of the events in ``view`` a retraction in ``view`` takes back,
    and of those retractions."""
    records, memo = view.records, view.memo
    n = len(records)
    scanned, ids = memo.get(_SCAN, (0, frozenset()))
    keep = scanned <= n  # a shorter prefix view (``without``) shares the memo of a longer list
    if not keep:
        scanned, ids = 0, frozenset()
    if scanned < n:
        found = [i for r in records[scanned:n] if r.retracts for i in (r.retracts, r.event_id)]
        if found:
            ids = ids | frozenset(found)
        if keep:
            memo[_SCAN] = (n, ids)
    result: frozenset[str] = ids
    return result


def honoured(view: HistoryView) -> HistoryView:
    """``view`` without retracted events and retractions (``view`` itself
    when it has none)."""
    ids = retracted_ids(view)
    if not ids:
        return view
    slot = (_VIEW, len(view.records))
    hit: HistoryView | None = view.memo.get(slot)
    if hit is None:
        hit = without(view, ids)
        view.memo[slot] = hit
    return hit
