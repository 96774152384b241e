"""Context building, the application service behind BuildContext and every
Generate turn: domain requests in, built contexts out (see
docs/ARCHITECTURE.md, "Layers" and "Request paths")."""
