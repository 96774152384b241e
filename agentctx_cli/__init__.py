"""The ``agentctx`` command: certificates, servers, database, diagnostics,
``up`` and the demo. The composition root: it imports both services (to
serve and migrate them) and nothing imports it.

Named apart from ``agentctx``, which the generated protobuf code owns.
"""
