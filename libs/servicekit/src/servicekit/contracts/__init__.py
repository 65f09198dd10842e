"""Typed contracts between services: the models both sides of a NATS request/reply use."""
