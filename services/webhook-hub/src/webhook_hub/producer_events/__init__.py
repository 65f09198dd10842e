"""producer events."""
