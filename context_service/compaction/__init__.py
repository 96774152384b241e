"""Compaction orchestration: compactor runners, the compaction service
(load, decide, summarize under a deadline, commit atomically) and the
durable background worker. The pure rules live in
``context_service.domain.compaction_rules``."""
