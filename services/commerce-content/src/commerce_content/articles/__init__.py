"""The example resource of the REST conventions: /api/v1/articles."""
