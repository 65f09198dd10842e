"""scraper-manager: Register, schedule, run, stop and monitor scrapers."""

__version__ = "0.1.0"
