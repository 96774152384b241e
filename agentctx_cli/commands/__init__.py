"""One module per ``agentctx`` subcommand, each with ``register(subparsers)``."""
