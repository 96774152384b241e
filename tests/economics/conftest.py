"""The cache tests' registry harness (a manual clock, the local simulator,
a real journal), reused for the comparison policies."""

from tests.cache.conftest import clock, harness_factory  # noqa: F401 - fixtures
