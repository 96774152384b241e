"""Agent turns: Generate and StreamGenerate orchestrated over the session
store, the context builder, the cache service (``ports.CachePort``) and
compaction. The pure rules are in ``context_service.domain.turn_rules``."""
