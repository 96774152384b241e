"""The ``agentctx`` command line."""
