"""shape ops (being written)."""
