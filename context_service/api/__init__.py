"""gRPC layer of the context service: servicers authorize, map proto to
domain and back (``context_service.mapping``) and call the application
services; the error interceptor maps domain errors. Nothing outside this
package imports it but the composition root (``server``)."""
