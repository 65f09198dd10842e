"""The product content API for single-page and mobile apps, and its admin side."""
