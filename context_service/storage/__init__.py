"""Durable storage of sessions and events (SQLAlchemy 2 async: SQLite by
default, PostgreSQL when a URL is configured). ``base.SessionStore`` is the
interface the rest of the service uses."""
