"""Agent turns: Generate and StreamGenerate orchestrated over the session
store, selection, the cache service and compaction. The pure rules are in
``context_service.domain.turns``."""
