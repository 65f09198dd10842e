"""Run logs: what each crawl wrote about itself, read over the API."""
