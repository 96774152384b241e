"""Fakes of external services (never of our own code)."""
