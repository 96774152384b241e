"""What the store contract's tests share."""

from __future__ import annotations

import dataclasses
import datetime as dt

from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, SessionKey
from context_service.ports import SessionStore
from tests.sessions.helpers import text_event

KEY = SessionKey("shop", "alice", "s1")


async def new_session(store: SessionStore, key: SessionKey = KEY, **state: object) -> str:
    """Creates ``key`` with ``state``; its etag."""
    return (await store.create_session(key, state=dict(state), config=ContextConfig())).etag


def text_at(event_id: str, when: dt.datetime) -> Event:
    """A text event the client dated ``when``."""
    return dataclasses.replace(text_event(event_id), create_time=when)
