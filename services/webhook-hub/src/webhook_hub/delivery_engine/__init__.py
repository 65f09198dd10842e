"""delivery engine."""
