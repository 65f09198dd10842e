"""Run webhooks, stored and delivered by webhook-hub."""
