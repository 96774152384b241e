"""Code both agentctx services share: errors and their gRPC mapping, TLS and
caller identity, settings, logging, telemetry, server bootstrap and the
``agentctx`` command line.

The generated protobuf code lives in the ``agentctx`` namespace; this package
is named apart from it so the two can never collide.
"""
