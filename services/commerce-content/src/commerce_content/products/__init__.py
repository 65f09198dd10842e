"""The catalogue: product queries and the rules of saving products."""
