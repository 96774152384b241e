"""The cache tests' registry harness (a manual clock, the local simulator,
a real journal), reused for the comparison policies."""

import pytest

from tests.cache.conftest import clock, harness_factory  # noqa: F401 - fixtures


@pytest.fixture
def registry_state() -> None:
    """The economics tests run on the in-memory registry (tests/cache runs
    both stores)."""
    return None
