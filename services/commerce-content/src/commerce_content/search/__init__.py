"""Cross-collection search (posts, products, pages)."""
