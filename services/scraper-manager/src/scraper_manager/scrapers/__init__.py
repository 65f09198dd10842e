"""Scrapers: their configuration and lifecycle."""
