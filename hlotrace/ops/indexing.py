"""indexing ops (being written)."""
