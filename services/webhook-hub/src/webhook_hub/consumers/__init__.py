"""consumers: operator settings of owners."""
