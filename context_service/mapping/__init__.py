"""Proto <-> domain mapping, shared by the inbound servicers (api/) and the
outbound adapters (cache client, model and remote compactors): each
message is converted once, at the edge (see docs/ARCHITECTURE.md,
"Layers")."""
