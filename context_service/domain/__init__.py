"""Pure domain logic of the context service: no grpc, no database."""
