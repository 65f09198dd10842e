"""notifications."""
