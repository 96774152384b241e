"""gRPC layer of the context service: servicers convert proto to domain and
back and let the error interceptor map domain errors."""
