"""Orders: checkout and payment notifications."""
