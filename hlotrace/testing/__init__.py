"""Test support: hypothesis strategies, the tolerance table, check_op and profiles.

Only tests and tools import this package (most of its modules need hypothesis).
"""
