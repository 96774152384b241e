"""The agentctx context service: sessions and events, context selection,
compaction and agent turns. See README.md and DESIGN.md section 3."""
