"""The crawl engine: fetching, politeness, extraction."""
