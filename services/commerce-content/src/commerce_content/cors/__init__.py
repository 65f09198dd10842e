"""Cross-origin rules for /api/."""
