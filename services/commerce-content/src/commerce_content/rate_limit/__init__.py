"""Per-client request limits."""
