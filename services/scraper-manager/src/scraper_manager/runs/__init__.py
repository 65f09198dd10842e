"""Runs: history, details, results."""
