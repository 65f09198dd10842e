"""OAuth2 for corporate clients: client credentials, and tokens from an external issuer."""
