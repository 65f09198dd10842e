"""Who is calling: bearer JWTs with a role, or API keys."""
