"""A pytest plugin, loaded into a run of ADK's own session-service tests in
the ADK venv, that holds AgentCtxSessionService to them.

ADK's tests get their services from ``get_session_service(service_type)``
(directly, or through the ``session_service`` fixture). This plugin points
that function at AgentCtxSessionService (on the context service named by
AGENTCTX_ADK_TARGET) and keeps only the tests that ask for ADK's
DATABASE service, the one this class stands in for: tests of the other
backends' parametrizations would repeat them, and tests that build a
DatabaseSessionService themselves test its SQLAlchemy internals. With
AGENTCTX_ADK_CONTROL set, the same tests run on ADK's own
DatabaseSessionService instead (the control). Each test
gets its own app prefix, so tests that reuse ids stay apart on one
service.
"""

from __future__ import annotations

import inspect
import itertools
import os
from typing import Any

import pytest

_counter = itertools.count()


def _is_database_param(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    return any(getattr(v, "name", None) == "DATABASE" for v in callspec.params.values())


def _uses_factory(item: pytest.Item) -> bool:
    """Not parametrized, but takes a service from get_session_service()."""
    function = getattr(item, "function", None)
    if function is None or getattr(item, "callspec", None) is not None:
        return False
    source = inspect.getsource(function)
    return "get_session_service(" in source and "DatabaseSessionService(" not in source


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        (keep if _is_database_param(item) or _uses_factory(item) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
    for module in {item.module for item in keep if getattr(item, "module", None) is not None}:
        if hasattr(module, "get_session_service"):
            module.get_session_service = _agentctx_service


def _agentctx_service(*args: Any, **kwargs: Any) -> Any:
    if os.environ.get("AGENTCTX_ADK_CONTROL"):
        # The control run: ADK's own DatabaseSessionService on the same
        # tests, to tell this suite's drift from ADK's release apart from
        # agentctx's differences.
        from google.adk.sessions.database_session_service import DatabaseSessionService

        return DatabaseSessionService("sqlite+aiosqlite:///:memory:")
    from agentctx_adk import AgentCtxSessionService

    from agentctx_client import TlsConfig

    return AgentCtxSessionService.connect(
        os.environ["AGENTCTX_ADK_TARGET"],
        tls=TlsConfig(ca=os.environ["AGENTCTX_ADK_CA"], server_name="localhost"),
        app_prefix=f"{os.environ.get('AGENTCTX_ADK_RUN', 'run')}.{next(_counter)}.",
    )
