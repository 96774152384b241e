"""Code both agentctx services (and the ``agentctx`` command, agentctx_cli)
share: errors and their gRPC mapping, TLS and caller identity, settings,
logging, telemetry and server bootstrap. It imports neither service.

The generated protobuf code lives in the ``agentctx`` namespace; this package
is named apart from it so the two can never collide.
"""
