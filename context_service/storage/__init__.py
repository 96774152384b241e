"""Durable storage of sessions and events (SQLAlchemy 2 async: SQLite by
default, PostgreSQL when a URL is configured). ``factory.open_backend``
returns every store the service uses, each behind its port in
``context_service.ports``."""
