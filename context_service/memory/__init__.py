"""Memory's application service (MemoryService's rules over the ports)."""
