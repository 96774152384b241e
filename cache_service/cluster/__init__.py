"""The cache tier shared by replicas, on Redis (see docs/ARCHITECTURE.md,
"Cache service"): the registry store, single flight across replicas, the
journal with per-replica ownership, and the tier keeper that adopts or
deletes the caches of a replica that died. Built by
cache_service.registry_backend when ``redis_url`` is set."""
