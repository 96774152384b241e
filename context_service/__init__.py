"""The agentctx context service: sessions and events, context selection,
compaction and agent turns. See docs/ARCHITECTURE.md."""
