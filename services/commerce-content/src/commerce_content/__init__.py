"""commerce-content: Resource API, checkout and payments, search, contact, admin action, product content API and GraphQL."""

__version__ = "0.1.0"
