"""The audited admin-only action."""
