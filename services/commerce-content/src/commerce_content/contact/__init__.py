"""The contact form."""
