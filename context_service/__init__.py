"""The agentctx context service: sessions and events, context building,
compaction and agent turns. See docs/ARCHITECTURE.md ("Layers",
"Request paths", "Ports")."""
