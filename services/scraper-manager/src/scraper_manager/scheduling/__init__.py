"""Cron schedules."""
