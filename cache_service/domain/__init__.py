"""Pure domain logic of the cache service: no grpc, no provider I/O."""
