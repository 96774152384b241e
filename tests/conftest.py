"""Fixtures every test area shares."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest

from agentctx_common.certs import init_dev_certs
from tests.support import postgres
from tests.support.backends import BACKENDS, empty_database


@pytest.fixture(scope="session")
def certs_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Dev CA and certificates, made once per run."""
    directory = tmp_path_factory.mktemp("certs")
    init_dev_certs(directory)
    return directory


@pytest.fixture(scope="session")
def postgres_factory() -> Iterator[object]:
    """Call it to get the SQLAlchemy URL of a new, empty PostgreSQL database.
    Skips the test when no server is reachable (.ci/run starts one)."""
    if not postgres.available():
        if os.environ.get("AGENTCTX_REQUIRE_POSTGRES"):
            pytest.fail("PostgreSQL is required (AGENTCTX_REQUIRE_POSTGRES) but not reachable")
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    yield postgres.create_dropped_at_end


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The session's PostgreSQL databases go when it ends (not in a test's
    teardown, which has the test's time limit)."""
    postgres.drop_created()


@pytest.fixture
def postgres_url(postgres_factory) -> str:  # type: ignore[no-untyped-def]
    """A new, empty PostgreSQL database for one test."""
    return postgres_factory()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each storage backend in turn (tests/support/backends.py)."""
    name: str = request.param
    return name


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    """An empty database (no schema) on each backend."""
    return empty_database(backend, request, tmp_path)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local S3-compatible server (moto) for the whole run, started here on
    a free loopback port: the object-store tests never skip."""
    from tests.support.s3 import moto_server

    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield endpoint


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A new, empty bucket for one test."""
    from tests.support.s3 import new_bucket

    return new_bucket(s3_endpoint)
