"""The agentctx cache service: provider prefix caches behind private leases,
and the model calls that use them. The only process that ever holds a
provider resource name or API key. See docs/ARCHITECTURE.md, "Ports" and
"Request paths"."""
